package locktest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// crashedHolderFreed: the lock of a crashed holder is held until its lease
// expires, then granted to the waiter: within [Min, Max] of the crash.
func (s *suite) crashedHolderFreed(t *testing.T) {
	const lock = "crashed-holder"
	a, b, c := s.h.NewClient(t, lock), s.h.NewClient(t, lock), s.h.NewClient(t, lock)
	la := s.acquire(t, a, "A")
	pb := s.acquireAsync(t, b, nil)

	crashed := time.Now()
	a.Crash()
	if lc, err := c.TryAcquire(stepCtx(t)); err == nil {
		releaseQuietly(lc)
		t.Errorf("the lock was free right after its holder crashed: its lease must last until it expires")
	} else if !errors.Is(err, recipe.ErrLocked) {
		t.Errorf("C: TryAcquire right after the holder crashed: %v, want recipe.ErrLocked", err)
	}

	r := await(t, pb, s.expiryWait(), "B, waiting for the crashed holder's lease to expire")
	freed := r.at.Sub(crashed)
	t.Logf("the crashed holder's lock was granted to B %v after the crash", freed.Round(time.Millisecond))
	if freed > s.lt.Max {
		t.Errorf("granted %v after the crash, later than LeaseTime.Max = %v", freed, s.lt.Max)
	}
	if freed < s.lt.Min {
		t.Errorf("granted %v after the crash, sooner than LeaseTime.Min = %v: the lease did not last", freed, s.lt.Min)
	}
	if r.lease.Token() <= la.Token() {
		t.Errorf("B's token %v is not larger than the crashed holder's %v", r.lease.Token(), la.Token())
	}
	release(t, r.lease, "B")
	s.expectLeftovers(t, lock, 0, "the crashed holder's entry expired with it and B released")
}

// fencingRejectsStaleWriter: Kleppmann's scenario. A (token 33) pauses past
// its lease; B acquires (token 34) and writes; A resumes and writes with 33:
// the resource must refuse it.
func (s *suite) fencingRejectsStaleWriter(t *testing.T) {
	const (
		lock     = "fencing"
		resource = "fenced-resource"
	)
	a, b := s.h.NewClient(t, lock), s.h.NewClient(t, lock)
	var (
		guard fence.Guard
		value string // the resource, written only through guard
	)
	write := func(tok fence.Token, v string) error {
		return guard.Do(resource, tok, func() error { value = v; return nil })
	}

	la := s.acquire(t, a, "A")
	if err := write(la.Token(), "A1"); err != nil {
		t.Fatalf("A's first write with token %v: %v", la.Token(), err)
	}
	pb := s.acquireAsync(t, b, nil)
	a.CutOff() // A pauses: nothing it does reaches the backend, it notices nothing
	r := await(t, pb, s.expiryWait(), "B, waiting for the paused holder's lease to expire")
	lb := r.lease
	if lb.Token() <= la.Token() {
		t.Fatalf("B's token %v is not larger than A's %v: the resource can't tell the stale writer", lb.Token(), la.Token())
	}
	if err := write(lb.Token(), "B1"); err != nil {
		t.Fatalf("B's write with token %v: %v", lb.Token(), err)
	}

	a.Heal() // A resumes where it paused and finishes its write with its old token
	err := write(la.Token(), "A2")
	if !errors.Is(err, fence.ErrStale) {
		t.Errorf("A's late write with token %v after B wrote with %v: %v, want fence.ErrStale", la.Token(), lb.Token(), err)
	}
	if value != "B1" {
		t.Errorf("resource holds %q after the stale write, want B's %q", value, "B1")
	}
	if err := write(lb.Token(), "B2"); err != nil {
		t.Errorf("B's second write with token %v: %v", lb.Token(), err)
	}
	releaseQuietly(la) // StaleReleaseKeepsNewHolder checks what this returns
	release(t, lb, "B")
}

// staleReleaseKeepsNewHolder: A loses its lease while cut off, B is granted,
// A heals and calls Release: ErrLeaseLost, and B keeps the lock.
func (s *suite) staleReleaseKeepsNewHolder(t *testing.T) {
	const lock = "stale-release"
	a, b, c := s.h.NewClient(t, lock), s.h.NewClient(t, lock), s.h.NewClient(t, lock)
	la := s.acquire(t, a, "A")
	pb := s.acquireAsync(t, b, nil)
	a.CutOff()
	lb := await(t, pb, s.expiryWait(), "B, waiting for the cut-off holder's lease to expire").lease
	a.Heal()

	if err := la.Release(stepCtx(t)); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("A: Release after losing the lease = %v, want an error matching recipe.ErrLeaseLost", err)
	}
	if cause := context.Cause(la.Context()); !lossCause(cause) {
		t.Errorf("A: lease context cause after the stale Release = %v, want the ownership loss", cause)
	}
	// Let A reach the backend again (and run any cleanup it does on
	// reconnection): it sees B's grant.
	s.untilLocked(t, a, "A, after healing")
	time.Sleep(200 * time.Millisecond) // room for asynchronous cleanup to misbehave

	if err := lb.Context().Err(); err != nil {
		t.Errorf("B's lease ended after the stale holder's Release (cause %v)", context.Cause(lb.Context()))
	}
	if lc, err := c.TryAcquire(stepCtx(t)); err == nil {
		releaseQuietly(lc)
		t.Fatalf("C acquired while B holds: the stale holder's Release removed B's grant")
	} else if !errors.Is(err, recipe.ErrLocked) {
		t.Errorf("C: TryAcquire while B holds: %v, want recipe.ErrLocked", err)
	}
	s.expectLeftovers(t, lock, 1, "B's grant only")
	release(t, lb, "B")

	la2 := s.acquire(t, a, "A, after healing") // A recovered
	if la2.Token() <= lb.Token() {
		t.Errorf("A's new token %v is not larger than B's %v", la2.Token(), lb.Token())
	}
	release(t, la2, "A")
	s.expectLeftovers(t, lock, 0, "every grant was released")
}

// untilLocked polls TryAcquire on c until it answers ErrLocked (c reaches the
// backend and sees the current holder). Other errors are retried: c may be
// reconnecting. A success fails the test.
func (s *suite) untilLocked(t *testing.T, c Client, who string) {
	t.Helper()
	deadline := time.Now().Add(s.expiryWait())
	for {
		ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
		l, err := c.TryAcquire(ctx)
		cancel()
		if err == nil {
			releaseQuietly(l)
			t.Fatalf("%s: TryAcquire succeeded while another client holds the lock", who)
		}
		if errors.Is(err, recipe.ErrLocked) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still can't reach the backend after %v: %v", who, s.expiryWait(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ownershipLossCancelsContext: a cut-off holder's lease context ends, with an
// ownership-loss cause, within Max and before anyone else is granted.
func (s *suite) ownershipLossCancelsContext(t *testing.T) {
	const lock = "ownership-loss"
	a, b := s.h.NewClient(t, lock), s.h.NewClient(t, lock)
	la := s.acquire(t, a, "A")
	var liveAtGrant atomic.Bool
	pb := s.acquireAsync(t, b, func(l recipe.Lease, err error) {
		if err == nil && la.Context().Err() == nil {
			liveAtGrant.Store(true)
		}
	})

	cut := time.Now()
	a.CutOff()
	if !waitDone(la.Context(), s.expiryWait()) {
		t.Fatalf("A's lease context is still live %v after A was cut off", s.expiryWait())
	}
	lost := time.Since(cut)
	t.Logf("the cut-off holder's lease context ended %v after the cut", lost.Round(time.Millisecond))
	if lost > s.lt.Max {
		t.Errorf("A's lease context ended %v after the cut, later than LeaseTime.Max = %v", lost, s.lt.Max)
	}
	if cause := context.Cause(la.Context()); !lossCause(cause) {
		t.Errorf("A's lease context cause = %v, want one matching recipe.ErrSuspended, ErrSessionLost or ErrNodeDeleted", cause)
	}
	r := await(t, pb, s.expiryWait(), "B, waiting for the cut-off holder's lease to expire")
	if liveAtGrant.Load() {
		t.Errorf("B was granted while A's lease context was still live: two holders")
	}
	a.Heal()
	if err := la.Release(stepCtx(t)); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("A: Release after losing the lease = %v, want an error matching recipe.ErrLeaseLost", err)
	}
	release(t, r.lease, "B")
}
