package locktest

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Observer returns a recipe.HolderObserver of the lock named lock, on a
// session of its own (registering its teardown with tb.Cleanup), for
// RunHolder.
type Observer func(tb testing.TB, lock string) recipe.HolderObserver

// RunHolder checks a backend's recipe.HolderObserver against its locks
// (h's clients) on lock names of its own: Holder reports a free lock, then
// each holder with its lease's token, then free again after Release and
// after a holder's crash (within LeaseTime.Max); ObserveHolder delivers the
// current state at once, follows three holders in grant order with growing
// tokens, never repeats a state, never shows a token that no grant had,
// ends on "free", and closes its channel when its ctx ends.
func RunHolder(t *testing.T, h Harness, observe Observer) {
	t.Helper()
	s := &suite{h: h, lt: h.LeaseTime()}
	t.Run("HolderRead", func(t *testing.T) { t.Parallel(); s.holderRead(t, observe) })
	t.Run("HolderObserved", func(t *testing.T) { t.Parallel(); s.holderObserved(t, observe) })
}

// holderRead: Holder on a free lock, a held one, a released one and one
// whose holder crashed.
func (s *suite) holderRead(t *testing.T, observe Observer) {
	const lock = "holder-read"
	o := observe(t, lock)
	expectHolder(t, o, fence.Token(0), "a lock never taken")
	a := s.h.NewClient(t, lock)
	la := s.acquire(t, a, "A")
	st := expectHolder(t, o, la.Token(), "held by A")
	if st.Holder.ID == "" {
		t.Errorf("held by A: empty ID in %+v", st)
	}
	if !st.Holder.Since.IsZero() && time.Since(st.Holder.Since) > time.Hour {
		t.Errorf("held by A: Since %v is far in the past", st.Holder.Since)
	}
	release(t, la, "A")
	expectHolder(t, o, fence.Token(0), "after A's Release")
	b := s.h.NewClient(t, lock)
	lb := s.acquire(t, b, "B")
	expectHolder(t, o, lb.Token(), "held by B")
	b.Crash()
	end := time.Now().Add(s.expiryWait())
	for {
		st, err := o.Holder(stepCtx(t))
		if err == nil && !st.Held {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("B crashed %v ago and the lock still reads %v (err %v)", s.expiryWait(), st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// expectHolder reads o once and fails t unless it shows token (zero: free).
func expectHolder(t *testing.T, o recipe.HolderObserver, token fence.Token, what string) recipe.HolderState {
	t.Helper()
	st, err := o.Holder(stepCtx(t))
	if err != nil {
		t.Fatalf("%s: Holder: %v", what, err)
	}
	if st.Held == token.IsZero() || st.Holder.Token != token {
		t.Fatalf("%s: Holder read %v (token %v), want token %v", what, st, st.Holder.Token, token)
	}
	return st
}

// holderObserved: an observer follows three holders, one after another,
// and ends on "free"; cancelling its ctx closes the channel.
func (s *suite) holderObserved(t *testing.T, observe Observer) {
	const lock = "holder-observed"
	o := observe(t, lock)
	c := s.h.NewClient(t, lock)
	first := s.acquire(t, c, "first")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := o.ObserveHolder(ctx)
	got := []recipe.HolderState{next(t, ch, "the state at once")}
	granted := map[fence.Token]bool{first.Token(): true}
	last := first
	for i := range 3 {
		release(t, last, "holder")
		if i < 2 {
			last = s.acquire(t, s.h.NewClient(t, lock), "next holder")
			granted[last.Token()] = true
		}
	}
	for got[len(got)-1].Held {
		got = append(got, next(t, ch, "the states up to free"))
	}
	if st := got[0]; !st.Held || st.Holder.Token != first.Token() {
		t.Errorf("first state %v, want held with token %v", st, first.Token())
	}
	for i, st := range got {
		if st.Held && !granted[st.Holder.Token] {
			t.Errorf("state %d: %v has a token no grant had", i, st)
		}
		if i > 0 && st == got[i-1] {
			t.Errorf("state %d repeats %v", i, st)
		}
		if i > 0 && st.Held && got[i-1].Held && st.Holder.Token < got[i-1].Holder.Token {
			t.Errorf("state %d: token went back: %v after %v", i, st, got[i-1])
		}
	}
	cancel()
	closed := time.After(OpTimeout)
	for {
		select {
		case _, ok := <-ch: // a state in flight may come first
			if !ok {
				return
			}
		case <-closed:
			t.Fatalf("the channel is still open %v after its ctx ended", OpTimeout)
		}
	}
}

// next receives one state from ch within OpTimeout.
func next(t *testing.T, ch <-chan recipe.HolderState, what string) recipe.HolderState {
	t.Helper()
	select {
	case st, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the channel closed", what)
		}
		return st
	case <-time.After(OpTimeout):
		t.Fatalf("%s: nothing within %v", what, OpTimeout)
	}
	return recipe.HolderState{}
}
