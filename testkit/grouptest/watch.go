package grouptest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// watchOrderedAndConverges: a watcher sees the group at once, then ordered,
// well-formed views while three clients change it concurrently, and ends on
// the group a fresh client reads.
func (s *suite) watchOrderedAndConverges(t *testing.T) {
	const (
		group   = "watch"
		writers = 3
	)
	w0 := s.h.NewClient(t, group)
	cs := make([]Client, writers)
	for i := range cs {
		cs[i] = s.h.NewClient(t, group)
	}
	early := join(t, cs[0], "client 0", "early", []byte("e0"))
	defer leaveQuietly(early)
	eventuallyMembers(t, w0, "the watcher's client", OpTimeout, "showing the member that joined", has("early"))

	// Every id any View may show, and the group the changes end with.
	known := map[string]bool{"early": true}
	want := map[string]string{"early": "e1"}
	for i := range writers {
		for _, suffix := range []string{"a", "b", "c"} {
			known[fmt.Sprintf("c%d-%s", i, suffix)] = true
		}
		want[fmt.Sprintf("c%d-a", i)] = "3"
		want[fmt.Sprintf("c%d-c", i)] = "1"
	}
	w := watch(t, w0, "the watcher", func(v recipe.View) {
		for _, mi := range v.Members {
			if !known[mi.ID] {
				t.Errorf("the watcher: a View shows %q, which no client joined: %s", mi.ID, show(v))
			}
		}
	})
	_, first := w.waitFor(0, OpTimeout, "the first View", func(recipe.View) bool { return true })
	if !has("early")(first.v) || len(first.v.Members) != 1 {
		t.Errorf("the watcher's first View = %s, want the group as it is (the member %q alone)", show(first.v), "early")
	}

	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { s.churn(t, c, i, w) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * OpTimeout):
		t.Fatalf("the clients' changes did not finish within %v", 10*OpTimeout)
	}
	if t.Failed() {
		return
	}
	if err := early.Update(stepCtx(t), []byte("e1")); err != nil {
		t.Fatalf("client 0: Update of %q: %v", "early", err)
	}

	fresh := s.h.NewClient(t, group)
	final := eventuallyMembers(t, fresh, "a fresh client", OpTimeout, "the group the changes made", func(v recipe.View) bool {
		if len(v.Members) != len(want) {
			return false
		}
		for _, mi := range v.Members {
			if d, ok := want[mi.ID]; !ok || !bytes.Equal(mi.Data, []byte(d)) {
				return false
			}
		}
		return true
	})
	last := w.untilLast(OpTimeout, "the fresh client's Members "+show(final), func(v recipe.View) bool {
		return sameMembers(v.Members, final.Members)
	})
	t.Logf("the watcher received %d Views; the last: rev %d, the fresh client's Members: rev %d", len(w.all()), last.Rev, final.Rev)
}

// churn is writer i's changes: join a, b and c, update a twice, b and c
// leave, c joins again. After each change it waits until the watcher w
// delivers a View with it (the other writers touch other ids, so each
// change stays until the writer's next one): many Views, each delivered.
func (s *suite) churn(t *testing.T, c Client, i int, w *recorder[recipe.View]) {
	who := fmt.Sprintf("client %d", i)
	a, b, cc := fmt.Sprintf("c%d-a", i), fmt.Sprintf("c%d-b", i), fmt.Sprintf("c%d-c", i)
	var ma, mb, mc recipe.Member
	joinStep := func(m *recipe.Member, id, data string) func() error {
		return func() error {
			var err error
			*m, err = c.Join(stepCtx(t), id, []byte(data))
			if *m = checkNil(t, who, id, *m, err); *m != nil {
				left := *m
				t.Cleanup(func() { leaveQuietly(left) })
			}
			return err
		}
	}
	holds := func(id, data string) func(recipe.View) bool {
		return func(v recipe.View) bool { mi, ok := find(v, id); return ok && string(mi.Data) == data }
	}
	steps := []struct {
		what   string
		do     func() error
		effect func(recipe.View) bool
	}{
		{"join a", joinStep(&ma, a, "1"), holds(a, "1")},
		{"join b", joinStep(&mb, b, "1"), holds(b, "1")},
		{"join c", joinStep(&mc, cc, "0"), holds(cc, "0")},
		{"update a", func() error { return ma.Update(stepCtx(t), []byte("2")) }, holds(a, "2")},
		{"b leaves", func() error { return mb.Leave(stepCtx(t)) }, lacks(b)},
		{"update a", func() error { return ma.Update(stepCtx(t), []byte("3")) }, holds(a, "3")},
		{"c leaves", func() error { return mc.Leave(stepCtx(t)) }, lacks(cc)},
		{"join c again", joinStep(&mc, cc, "1"), holds(cc, "1")},
	}
	for _, st := range steps {
		from := w.count()
		if err := st.do(); err != nil {
			t.Errorf("%s: %s: %v", who, st.what, err)
			return
		}
		if _, _, err := w.await(from, OpTimeout, "a View after "+who+"'s "+st.what, st.effect); err != nil {
			t.Error(err)
			return
		}
	}
}
