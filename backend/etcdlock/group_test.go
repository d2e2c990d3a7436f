package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// group returns the group named name on s, failing the test on an error.
func group(t testing.TB, s *etcdlock.Session, name string) *etcdlock.Group {
	t.Helper()
	g, err := etcdlock.NewGroup(s, name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// join joins g as id with data, failing the test on an error; the member
// leaves at the test's end.
func join(t testing.TB, g *etcdlock.Group, id, data string) recipe.Member {
	t.Helper()
	m, err := g.Join(opCtx(t), id, []byte(data))
	if err != nil {
		t.Fatalf("join %s: %v", id, err)
	}
	t.Cleanup(func() { _ = m.Leave(context.Background()) })
	return m
}

// memberKeys returns the keys of group name through the inspector.
func (e *env) memberKeys(t testing.TB, name string) *clientv3.GetResponse {
	t.Helper()
	resp, err := e.in.Get(opCtx(t), e.prefix+"/"+name+"/_member_", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// members renders a View's members as "id=data id=data ...".
func members(v recipe.View) string {
	var b []string
	for _, m := range v.Members {
		b = append(b, fmt.Sprintf("%s=%s", m.ID, m.Data))
	}
	return strings.Join(b, " ")
}

func TestGroupJoinMembersLeave(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s1, _ := e.connect(t)
	s2, _ := e.connect(t)
	g1, g2 := group(t, s1, "workers"), group(t, s2, "workers")
	b := join(t, g2, "b", "B")
	a := join(t, g1, "a", "A")
	v, err := g2.Members(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := members(v); got != "a=A b=B" {
		t.Fatalf("members: %q, want %q", got, "a=A b=B")
	}
	if v.Members[0].Since <= v.Members[1].Since || v.Rev < v.Members[0].Since {
		t.Errorf("view %+v: want a joined after b, Rev at or after both", v)
	}
	if a.ID() != "a" {
		t.Errorf("ID: %q", a.ID())
	}
	// A foreign key in the range is left out.
	if _, err := e.in.Put(opCtx(t), e.prefix+"/workers/_member_x/y", "z"); err != nil {
		t.Fatal(err)
	}
	if v, err := g1.Members(opCtx(t)); err != nil || members(v) != "a=A b=B" {
		t.Fatalf("members with a foreign key: %q, %v", members(v), err)
	}
	if _, err := e.in.Delete(opCtx(t), e.prefix+"/workers/_member_x/y"); err != nil {
		t.Fatal(err)
	}
	for _, m := range []recipe.Member{a, b} {
		if err := m.Leave(opCtx(t)); err != nil {
			t.Fatalf("leave: %v", err)
		}
		if err := m.Leave(opCtx(t)); err != nil {
			t.Fatalf("second leave: %v", err)
		}
		if _, err := m.Registered(opCtx(t)); !errors.Is(err, recipe.ErrLeft) {
			t.Errorf("Registered after Leave: %v, want ErrLeft", err)
		}
	}
	if n := e.memberKeys(t, "workers").Count; n != 0 {
		t.Fatalf("%d keys left after Leave", n)
	}
	// A member may join again after leaving, on the same Session.
	join(t, g1, "a", "again")
}

func TestGroupInputs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A 10 s TTL: a 1 MiB put under the race detector on a loaded machine
	// can hold the keep-alives past the test TTL's 2 s.
	s, _ := e.connect(t, etcdlock.WithTTL(10*time.Second))
	if _, err := etcdlock.NewGroup(s, "a/_member_x"); !errors.Is(err, recipe.ErrInvalidPath) {
		t.Errorf("NewGroup with a reserved element: %v", err)
	}
	if _, err := etcdlock.NewGroup(nil, "a"); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("NewGroup(nil): %v", err)
	}
	g := group(t, s, "inputs")
	for _, id := range []string{"", "a/b", "..", strings.Repeat("x", recipe.MaxMemberID+1)} {
		if _, err := g.Join(opCtx(t), id, nil); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("Join(%q): %v, want ErrInvalidPath", id, err)
		}
	}
	if _, err := g.Join(opCtx(t), "big", make([]byte, etcdlock.MaxMemberData+1)); !errors.Is(err, recipe.ErrTooLarge) {
		t.Errorf("Join with data over MaxMemberData: %v", err)
	}
	m := join(t, g, "max", strings.Repeat("d", etcdlock.MaxMemberData))
	if err := m.Update(opCtx(t), make([]byte, etcdlock.MaxMemberData+1)); !errors.Is(err, recipe.ErrTooLarge) {
		t.Errorf("Update with data over MaxMemberData: %v", err)
	}
	if err := m.Leave(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	if n := e.memberKeys(t, "inputs").Count; n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

// A second registration of an id is refused, from another Session or the
// same one, and leaves the first as it was.
func TestGroupDuplicateID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s1, _ := e.connect(t)
	s2, _ := e.connect(t)
	g1, g2 := group(t, s1, "dup"), group(t, s2, "dup")
	first := join(t, g1, "x", "first")
	before := e.memberKeys(t, "dup")
	for i, g := range []*etcdlock.Group{g2, g1, group(t, s1, "dup")} {
		if m, err := g.Join(opCtx(t), "x", []byte("second")); !errors.Is(err, recipe.ErrMemberExists) {
			t.Fatalf("join %d of a held id: %v, %v; want ErrMemberExists", i, m, err)
		}
	}
	after := e.memberKeys(t, "dup")
	if after.Count != 1 || string(after.Kvs[0].Value) != "first" || after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
		t.Fatalf("the first registration changed: %v", after.Kvs)
	}
	if err := first.Leave(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	join(t, g2, "x", "second")
}

// Update writes the member's data; a write by someone else in between
// makes the next Update ErrConflict, and leaves that write in place.
func TestGroupUpdateConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t)
	g := group(t, s, "upd")
	m := join(t, g, "m", "v1")
	for _, d := range []string{"v2", "v3"} {
		if err := m.Update(opCtx(t), []byte(d)); err != nil {
			t.Fatalf("update %s: %v", d, err)
		}
	}
	if v, err := g.Members(opCtx(t)); err != nil || members(v) != "m=v3" {
		t.Fatalf("after updates: %q, %v", members(v), err)
	}
	key := e.prefix + "/upd/_member_m"
	if _, err := e.in.Put(opCtx(t), key, "foreign", clientv3.WithIgnoreLease()); err != nil {
		t.Fatal(err)
	}
	if err := m.Update(opCtx(t), []byte("v4")); !errors.Is(err, recipe.ErrConflict) {
		t.Fatalf("update after a foreign write: %v, want ErrConflict", err)
	}
	if v, err := g.Members(opCtx(t)); err != nil || members(v) != "m=foreign" {
		t.Fatalf("after a conflict: %q, %v", members(v), err)
	}
	// The registration lives on: the key is still under the member's lease.
	if ctx, err := m.Registered(opCtx(t)); err != nil || ctx.Err() != nil {
		t.Fatalf("registered after a conflict: %v", err)
	}
}

// watchUntil reads views from ch until one shows want, checking that Rev
// never decreases; it returns that view.
func watchUntil(t *testing.T, ch <-chan recipe.View, last *int64, want string) recipe.View {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed waiting for %q", want)
			}
			if v.Rev < *last {
				t.Fatalf("view Rev %d after %d", v.Rev, *last)
			}
			*last = v.Rev
			if members(v) == want {
				return v
			}
		case <-timeout:
			t.Fatalf("no view %q", want)
		}
	}
}

func TestGroupWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s1, _ := e.connect(t)
	s2, _ := e.connect(t)
	g1, g2 := group(t, s1, "w"), group(t, s2, "w")
	ctx, cancel := context.WithCancel(context.Background())
	ch := g2.Watch(ctx)
	var last int64
	select {
	case v := <-ch:
		if len(v.Members) != 0 || v.Rev <= 0 {
			t.Fatalf("first view %+v", v)
		}
		last = v.Rev
	case <-time.After(10 * time.Second):
		t.Fatal("no first view")
	}
	a := join(t, g1, "a", "1")
	watchUntil(t, ch, &last, "a=1")
	b := join(t, g2, "b", "2")
	watchUntil(t, ch, &last, "a=1 b=2")
	if err := a.Update(opCtx(t), []byte("1b")); err != nil {
		t.Fatal(err)
	}
	watchUntil(t, ch, &last, "a=1b b=2")
	if err := a.Leave(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	v := watchUntil(t, ch, &last, "b=2")
	if m, _ := g2.Members(opCtx(t)); m.Rev < v.Rev || members(m) != "b=2" {
		t.Fatalf("Members after the watch's view: %+v (view %+v)", m, v)
	}
	// A slow reader: many changes, then the latest view.
	for i := range 20 {
		if err := b.Update(opCtx(t), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	watchUntil(t, ch, &last, "b=19")
	cancel()
	for range ch { // closes when ctx ends
	}
	// A closed Session closes the channel too.
	ch2 := g1.Watch(context.Background())
	<-ch2
	s1.Close()
	for range ch2 {
	}
}

// A watch across a compaction of the store converges. The server is the
// test's own: a compaction of the shared one would cut the history other
// tests read.
func TestGroupWatchCompaction(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	e := &env{srv: srv, prefix: etcdtest.Prefix(t, srv), in: srv.Client(t)}
	s1, _ := e.connect(t)
	s2, _ := e.connect(t)
	g1, g2 := group(t, s1, "c"), group(t, s2, "c")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := g2.Watch(ctx)
	var last int64
	watchUntil(t, ch, &last, "")
	a := join(t, g1, "a", "1")
	watchUntil(t, ch, &last, "a=1")
	for i := range 5 {
		if err := a.Update(opCtx(t), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := e.in.Get(opCtx(t), "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.in.Compact(opCtx(t), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	join(t, g1, "b", "2")
	if err := a.Leave(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	watchUntil(t, ch, &last, "b=2")
}

// A Join whose ctx ends while its put is in flight (applied by the server,
// its answer slow) waits for the answer and deletes the key: it leaves
// nothing behind, and the id is free again.
func TestGroupJoinCancelledLeavesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, p := e.connect(t)
	g := group(t, s, "cancel")
	before, err := e.in.Get(opCtx(t), "x")
	if err != nil {
		t.Fatal(err)
	}
	p.SetLatency(150 * time.Millisecond) // a round trip of 300 ms: within attemptTimeout (500 ms)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if m, err := g.Join(ctx, "m", []byte("d")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("join with a slow answer: %v, %v; want the ctx's deadline", m, err)
	}
	if n := e.memberKeys(t, "cancel").Count; n != 0 {
		t.Fatalf("%d keys left by a cancelled Join", n)
	}
	// The put was applied, then deleted.
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	var seen []string
	for wr := range e.in.Watch(wctx, e.prefix+"/cancel/_member_m", clientv3.WithRev(before.Header.Revision+1)) {
		for _, ev := range wr.Events {
			seen = append(seen, ev.Type.String())
		}
		if len(seen) >= 2 {
			break
		}
	}
	if strings.Join(seen, ",") != "PUT,DELETE" {
		t.Errorf("the key's history: %v, want PUT,DELETE", seen)
	}
	p.SetLatency(0)
	join(t, g, "m", "d")
}
