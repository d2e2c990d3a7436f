package grouptest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// basics: Join, Members, Registered, Listen, Update, a refused Join, bad
// ids, Leave and what answers after it, the id joined again.
func (s *suite) basics(t *testing.T) {
	const (
		group = "basics"
		id    = "alpha"
	)
	a, b := s.h.NewClient(t, group), s.h.NewClient(t, group)
	m := join(t, a, "A", id, []byte("a1"))
	defer leaveQuietly(m)

	v := eventuallyMembers(t, b, "B", OpTimeout, "showing the member that joined", has(id))
	if len(v.Members) != 1 {
		t.Errorf("B: Members = %s, want the one member", show(v))
	}
	mi, _ := find(v, id)
	if !bytes.Equal(mi.Data, []byte("a1")) || mi.Since <= 0 {
		t.Errorf("B: Members shows %s=%q@%d, want the data %q and a positive Since", mi.ID, mi.Data, mi.Since, "a1")
	}
	since := mi.Since
	rctx := registered(t, m, "A", OpTimeout)
	l := listen(t, m, "A: Listen")
	_, first := l.waitFor(0, OpTimeout, "the current registration", func(recipe.Registration) bool { return true })
	if !first.v.Registered || first.v.Since != since {
		t.Errorf("A: Listen's first Registration %+v, want the live one (Registered, Since %d as Members shows)", first.v, since)
	}

	if err := m.Update(stepCtx(t), []byte("a2")); err != nil {
		t.Fatalf("A: Update: %v", err)
	}
	v = eventuallyMembers(t, b, "B", OpTimeout, "showing the updated data", func(v recipe.View) bool {
		mi, ok := find(v, id)
		return ok && bytes.Equal(mi.Data, []byte("a2"))
	})
	if mi, _ := find(v, id); mi.Since != since {
		t.Errorf("B: the member's Since went from %d to %d at an Update: an Update is no new registration", since, mi.Since)
	}

	// The id is held: another client's Join is refused and changes nothing.
	if m2, err := tryJoin(t, stepCtx(t), b, "B", id, []byte("b1")); !errors.Is(err, recipe.ErrMemberExists) {
		leaveQuietly(m2)
		t.Errorf("B: Join(%q) while A's member lives: %v, want an error matching recipe.ErrMemberExists", id, err)
	}
	// Bad ids are refused and leave nothing.
	for _, bad := range []string{"", "a/b", "..", strings.Repeat("x", recipe.MaxMemberID+1)} {
		if m2, err := tryJoin(t, stepCtx(t), b, "B", bad, nil); !errors.Is(err, recipe.ErrInvalidPath) {
			leaveQuietly(m2)
			t.Errorf("B: Join(%.20q) (%d bytes): %v, want an error matching recipe.ErrInvalidPath", bad, len(bad), err)
		}
	}
	if n := s.leftovers(t, group); n != 1 {
		t.Errorf("%d entries stored after the refused joins, want A's 1: a refused Join must leave nothing", n)
	}
	if rctx.Err() != nil {
		t.Errorf("A: the Registered context ended (cause %v) after an Update and refused joins", context.Cause(rctx))
	}
	if v := members(t, b, "B"); len(v.Members) != 1 || !bytes.Equal(v.Members[0].Data, []byte("a2")) || v.Members[0].Since != since {
		t.Errorf("B: Members after the refused joins = %s, want A's member alone, unchanged", show(v))
	}

	leave(t, stepCtx(t), m, "A")
	if !waitDone(rctx, OpTimeout) {
		t.Errorf("A: the Registered context is still live %v after Leave", OpTimeout)
	} else if cause := context.Cause(rctx); !errors.Is(cause, recipe.ErrReleased) {
		t.Errorf("A: the Registered context ended with cause %v after Leave, want recipe.ErrReleased", cause)
	}
	got := l.waitEnd(OpTimeout)
	if last := got[len(got)-1].v; last.Registered || !errors.Is(last.Cause, recipe.ErrLeft) {
		t.Errorf("A: Listen's last Registration after Leave: %+v, want an ended one with cause recipe.ErrLeft", last)
	}
	if n := s.leftovers(t, group); n != 0 {
		t.Errorf("%d entries stored after Leave returned nil, want 0", n)
	}
	eventuallyMembers(t, b, "B", OpTimeout, "empty after Leave", func(v recipe.View) bool { return len(v.Members) == 0 })
	if _, err := m.Registered(stepCtx(t)); !errors.Is(err, recipe.ErrLeft) {
		t.Errorf("A: Registered after Leave: %v, want recipe.ErrLeft", err)
	}
	if err := m.Update(stepCtx(t), []byte("a3")); !errors.Is(err, recipe.ErrLeft) {
		t.Errorf("A: Update after Leave: %v, want recipe.ErrLeft", err)
	}
	leave(t, stepCtx(t), m, "A, leaving again")
	if n := s.leftovers(t, group); n != 0 {
		t.Errorf("%d entries stored after a second Leave, want 0", n)
	}

	// The id is free: B joins it, as a new registration.
	mb := join(t, b, "B", id, []byte("b2"))
	defer leaveQuietly(mb)
	v = eventuallyMembers(t, a, "A", OpTimeout, "showing B's member", has(id))
	if mi, _ := find(v, id); mi.Since == since || !bytes.Equal(mi.Data, []byte("b2")) {
		t.Errorf("A: Members shows %s=%q@%d after B joined the freed id, want B's data %q and a Since other than the first registration's %d", mi.ID, mi.Data, mi.Since, "b2", since)
	}
	leave(t, stepCtx(t), mb, "B")
	s.expectLeftovers(t, group, 0, OpTimeout, "every member left")
}

// noDuplicateUnderRace: clients join the same id at once; exactly one wins.
func (s *suite) noDuplicateUnderRace(t *testing.T) {
	const (
		group  = "race"
		n      = 4
		rounds = 3
	)
	clients := make([]Client, n)
	for i := range clients {
		clients[i] = s.h.NewClient(t, group)
	}
	for r := range rounds {
		id := fmt.Sprintf("racer-%d", r)
		res := make([]joined, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Go(func() {
				<-start
				ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
				defer cancel()
				m, err := c.Join(ctx, id, []byte{byte('0' + i)})
				res[i] = joined{checkNil(t, fmt.Sprintf("client %d", i), id, m, err), err}
			})
		}
		close(start)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * OpTimeout):
			t.Fatalf("round %d: concurrent Joins did not all return within %v", r, 2*OpTimeout)
		}
		winner := -1
		for i, j := range res {
			switch {
			case j.err == nil && winner >= 0:
				t.Errorf("round %d: clients %d and %d both joined %q", r, winner, i, id)
			case j.err == nil:
				winner = i
			case !errors.Is(j.err, recipe.ErrMemberExists):
				t.Errorf("round %d: client %d: Join(%q): %v, want nil or an error matching recipe.ErrMemberExists", r, i, id, j.err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no client joined %q", r, id)
		}
		if k := s.leftovers(t, group); k != 1 {
			t.Errorf("round %d: %d entries stored once the Joins returned, want the winner's 1", r, k)
		}
		other := clients[(winner+1)%n]
		v := eventuallyMembers(t, other, "another client", OpTimeout, "showing the winner", has(id))
		if mi, _ := find(v, id); len(v.Members) != 1 || !bytes.Equal(mi.Data, []byte{byte('0' + winner)}) {
			t.Errorf("round %d: Members = %s, want %q alone with the winner's (client %d's) data", r, show(v), id, winner)
		}
		for _, j := range res {
			if j.m != nil {
				leave(t, stepCtx(t), j.m, "the winner")
			}
		}
		if k := s.leftovers(t, group); k != 0 {
			t.Errorf("round %d: %d entries stored after the winner's Leave, want 0", r, k)
		}
		if t.Failed() {
			return
		}
	}
}

// leaveWithDoneContext: Leave with a context already done still removes
// the registration.
func (s *suite) leaveWithDoneContext(t *testing.T) {
	const (
		group = "leave-done"
		id    = "gamma"
	)
	a, b := s.h.NewClient(t, group), s.h.NewClient(t, group)
	m := join(t, a, "A", id, []byte("g"))
	eventuallyMembers(t, b, "B", OpTimeout, "showing the member", has(id))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	ch := make(chan error, 1)
	go func() { ch <- m.Leave(ctx) }()
	select {
	case err := <-ch:
		if err != nil {
			t.Errorf("A: Leave with a context already done: %v, want nil (the removal confirmed)", err)
		}
	case <-time.After(OpTimeout):
		t.Fatalf("A: Leave with a context already done did not return within %v", OpTimeout)
	}
	s.expectLeftovers(t, group, 0, s.expiryWait(), "the member left with a context already done")
	t.Logf("no entry left %v after Leave with a done context began", time.Since(start).Round(time.Millisecond))
	if _, err := m.Registered(stepCtx(t)); !errors.Is(err, recipe.ErrLeft) {
		t.Errorf("A: Registered after Leave: %v, want recipe.ErrLeft", err)
	}
	eventuallyMembers(t, b, "B", OpTimeout, "without the member that left", lacks(id))
	mb := join(t, b, "B", id, []byte("b"))
	leave(t, stepCtx(t), mb, "B")
	s.expectLeftovers(t, group, 0, OpTimeout, "every member left")
}
