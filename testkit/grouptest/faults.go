package grouptest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// crashedMemberDropped: a crashed client's member stays visible until its
// session expires, within DeadVisible, then is gone for good.
func (s *suite) crashedMemberDropped(t *testing.T) {
	const (
		group = "crashed"
		id    = "doomed"
	)
	a, b := s.h.NewClient(t, group), s.h.NewClient(t, group)
	join(t, a, "A", id, []byte("d"))
	w := watch(t, b, "B's watcher", nil)
	seen, _ := w.waitFor(0, OpTimeout, "a View with the member", has(id))

	crashed := time.Now()
	a.Crash()
	if v := members(t, b, "B"); !has(id)(v) {
		t.Errorf("B: Members right after the crash = %s: the member was dropped at once, not when its session expired", show(v))
	}
	i, gone := w.waitFor(seen+1, s.expiryWait(), "a View without the crashed member", lacks(id))
	d := gone.at.Sub(crashed)
	t.Logf("the crashed member was dropped from B's view %v after the crash", d.Round(time.Millisecond))
	if d > s.b.DeadVisible.Max {
		t.Errorf("the crashed member was dropped %v after the crash, later than DeadVisible.Max = %v", d, s.b.DeadVisible.Max)
	}
	if d < s.b.DeadVisible.Min {
		t.Errorf("the crashed member was dropped %v after the crash, sooner than DeadVisible.Min = %v", d, s.b.DeadVisible.Min)
	}
	s.expectLeftovers(t, group, 0, OpTimeout, "the crashed member's entry expired with its session")
	if v := members(t, b, "B"); has(id)(v) {
		t.Errorf("B: Members after the drop = %s: the crashed member is back", show(v))
	}
	for j, sv := range w.all()[i:] {
		if has(id)(sv.v) {
			t.Errorf("B's watcher: View %d, after the drop, shows the crashed member again: %s", i+j, show(sv.v))
		}
	}
}

// cutOffContextEndsFirst: a cut-off member's Registered context ends within
// CutOffContext and before the others drop it; healed, it registers again
// by itself, once.
func (s *suite) cutOffContextEndsFirst(t *testing.T) {
	const (
		group = "cut-off"
		id    = "cut"
	)
	a, b := s.h.NewClient(t, group), s.h.NewClient(t, group)
	m := join(t, a, "A", id, []byte("c"))
	defer leaveQuietly(m)
	rctx := registered(t, m, "A", OpTimeout)
	l := listen(t, m, "A: Listen")
	_, first := l.waitFor(0, OpTimeout, "the current registration", func(recipe.Registration) bool { return true })

	// armed once B saw the member: from then on, a View without it while
	// A's Registered context is live is a member dropped while it still
	// believes it is registered.
	var armed, liveAtDrop atomic.Bool
	w := watch(t, b, "B's watcher", func(v recipe.View) {
		if armed.Load() && !has(id)(v) && rctx.Err() == nil {
			liveAtDrop.Store(true)
		}
	})
	seen, _ := w.waitFor(0, OpTimeout, "a View with the member", has(id))
	armed.Store(true)

	cut := time.Now()
	a.CutOff()
	if !waitDone(rctx, s.expiryWait()) {
		t.Fatalf("A: the Registered context is still live %v after A was cut off", s.expiryWait())
	}
	ended := time.Since(cut)
	t.Logf("the cut-off member's Registered context ended %v after the cut (cause %v)", ended.Round(time.Millisecond), context.Cause(rctx))
	if ended > s.b.CutOffContext {
		t.Errorf("A: the Registered context ended %v after the cut, later than CutOffContext = %v", ended, s.b.CutOffContext)
	}
	if cause := context.Cause(rctx); !errors.Is(cause, recipe.ErrSuspended) && !errors.Is(cause, recipe.ErrSessionLost) {
		t.Errorf("A: the Registered context's cause = %v, want one matching recipe.ErrSuspended or recipe.ErrSessionLost", cause)
	}
	li, lost := l.waitFor(1, OpTimeout, "the registration's end", func(r recipe.Registration) bool { return !r.Registered })
	if lost.v.Since != first.v.Since {
		t.Errorf("A: Listen reported the end of Since %d, want the registration that was live (Since %d)", lost.v.Since, first.v.Since)
	}

	dropIdx, gone := w.waitFor(seen+1, s.expiryWait(), "a View without the cut-off member", lacks(id))
	t.Logf("B's view dropped the cut-off member %v after the cut", gone.at.Sub(cut).Round(time.Millisecond))
	if liveAtDrop.Load() {
		t.Errorf("B's view dropped the cut-off member while its Registered context was still live")
	}

	a.Heal()
	healed := time.Now()
	_, again := l.waitFor(li+1, s.expiryWait(), "a new registration after Heal", func(r recipe.Registration) bool { return r.Registered })
	t.Logf("A registered again %v after Heal (Since %d, was %d)", again.at.Sub(healed).Round(time.Millisecond), again.v.Since, first.v.Since)
	registered(t, m, "A, healed", s.expiryWait())
	v := eventuallyMembers(t, b, "B", s.expiryWait(), "showing the healed member", has(id))
	if mi, _ := find(v, id); len(v.Members) != 1 || string(mi.Data) != "c" {
		t.Errorf("B: Members after Heal = %s, want the member %q alone with its data %q", show(v), id, "c")
	}
	w.waitFor(dropIdx+1, s.expiryWait(), "a View with the healed member", has(id))
	s.expectLeftovers(t, group, 1, s.expiryWait(), "the healed member's one registration")
	// Members tells incarnations apart as Listen does.
	regs := l.all()
	if cur := regs[len(regs)-1].v; cur.Registered {
		eventuallyMembers(t, b, "B", OpTimeout, "showing the Since of the member's live registration", func(v recipe.View) bool {
			mi, ok := find(v, id)
			return ok && mi.Since == cur.Since
		})
	}
	leave(t, stepCtx(t), m, "A")
	s.expectLeftovers(t, group, 0, OpTimeout, "the member left")
}
