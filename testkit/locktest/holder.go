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
// each held until the observer has shown it, and ends on "free"; every
// state it delivers differs from the one before, shows only tokens that
// grants had, never a token below an earlier one; cancelling its ctx
// closes the channel.
func (s *suite) holderObserved(t *testing.T, observe Observer) {
	const lock = "holder-observed"
	o := observe(t, lock)
	first := s.acquire(t, s.h.NewClient(t, lock), "first")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := o.ObserveHolder(ctx)
	var got []recipe.HolderState
	granted := map[fence.Token]bool{}
	until := func(what string, done func(recipe.HolderState) bool) {
		t.Helper()
		for {
			st := next(t, ch, what)
			checkNext(t, got, st, granted)
			if got = append(got, st); done(st) {
				return
			}
		}
	}
	l := first
	for i := range 3 {
		if i > 0 {
			l = s.acquire(t, s.h.NewClient(t, lock), "next holder")
		}
		granted[l.Token()] = true
		until("the holder's grant", func(st recipe.HolderState) bool { return st.Held && st.Holder.Token == l.Token() })
		release(t, l, "holder")
	}
	until("free after the last Release", func(st recipe.HolderState) bool { return !st.Held })
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

// checkNext fails t if st, delivered after got, repeats the last state,
// shows a token no grant had, or one below an earlier state's.
func checkNext(t *testing.T, got []recipe.HolderState, st recipe.HolderState, granted map[fence.Token]bool) {
	t.Helper()
	if st.Held && !granted[st.Holder.Token] {
		t.Errorf("%v has a token no grant had (yet)", st)
	}
	if len(got) > 0 && st == got[len(got)-1] {
		t.Errorf("%v repeats the state before it", st)
	}
	for _, g := range got {
		if st.Held && g.Held && st.Holder.Token < g.Holder.Token {
			t.Errorf("token went back: %v after %v", st, g)
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
