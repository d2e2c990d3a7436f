package locktest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// errGiveUp is the cause with which the suite cancels an attempt.
var errGiveUp = errors.New("locktest: the caller gave up")

// cancellationLeavesNothing: every way an attempt can end without a grant
// returns the right error and leaves no entry.
func (s *suite) cancellationLeavesNothing(t *testing.T) {
	const lock = "cancellation"
	a, b, c := s.h.NewClient(t, lock), s.h.NewClient(t, lock), s.h.NewClient(t, lock)
	la := s.acquire(t, a, "A")
	s.cancelWhileHeld(t, lock, la, b)
	s.expectLeftovers(t, lock, 1, "A's grant only: no cancelled attempt left an entry")

	release(t, la, "A")
	s.expectLeftovers(t, lock, 0, "A released and no cancelled attempt left an entry")
	lc, err := c.TryAcquire(stepCtx(t))
	if err != nil {
		t.Fatalf("C: TryAcquire of the lock nobody holds: %v (something left behind blocks it)", err)
	}
	release(t, lc, "C")

	s.cancelOnFreeLock(t, lock, b, c)
	s.cancelOnNewLocks(t, lock)
}

// refused checks B's attempt that must fail, while A (its lease la) holds
// the lock, with an error matching want. A grant after A's lease ended
// (a machine too loaded for the backend's bound) is reported as that, not
// as two holders.
func refused(t *testing.T, la recipe.Lease, what string, l recipe.Lease, err, want error) {
	t.Helper()
	if err == nil {
		releaseQuietly(l)
		if la.Context().Err() != nil {
			t.Fatalf("B: %s: granted after A's lease ended (%v): the step needs A to hold the lock throughout", what, context.Cause(la.Context()))
		}
		t.Fatalf("B: %s: granted while A holds the lock", what)
	}
	if !errors.Is(err, want) {
		t.Errorf("B: %s: %v, want an error matching %v", what, err, want)
	}
}

// cancelWhileHeld: B's attempts on the lock A holds, refused or ended by
// their context before, while and after they queue.
func (s *suite) cancelWhileHeld(t *testing.T, lock string, la recipe.Lease, b Client) {
	l, err := b.TryAcquire(stepCtx(t))
	refused(t, la, "TryAcquire while A holds", l, err, recipe.ErrLocked)

	cctx, ccancel := context.WithCancelCause(context.Background())
	ccancel(errGiveUp)
	l, err = acquireWithin(t, "B", b, cctx)
	refused(t, la, "Acquire with a context already cancelled", l, err, errGiveUp)

	dctx, dcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	l, err = acquireWithin(t, "B", b, dctx)
	dcancel()
	refused(t, la, "Acquire whose deadline passes while waiting", l, err, context.DeadlineExceeded)

	// Cancelled while queued: give the waiter time to queue (backends that
	// queue waiters show a second entry), then cancel it.
	qctx, qcancel := context.WithCancelCause(context.Background())
	queued := make(chan result, 1)
	go func() {
		l, err := b.Acquire(qctx)
		queued <- result{lease: l, err: err}
	}()
	for i := 0; i < 50; i++ {
		if n, err := s.h.Leftovers(stepCtx(t), lock); err != nil || n >= 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	qcancel(errGiveUp)
	select {
	case r := <-queued:
		refused(t, la, "Acquire cancelled while queued", r.lease, r.err, errGiveUp)
	case <-time.After(OpTimeout):
		t.Fatalf("B: Acquire did not return within %v of its context's cancellation", OpTimeout)
	}

	// Cancelled at assorted moments, some while the request is in flight.
	for i := 0; i < 16; i++ {
		l, err := acquireCancelled(t, b, time.Duration(i)*500*time.Microsecond)
		refused(t, la, "Acquire cancelled in flight", l, err, errGiveUp)
	}
}

// acquireCancelled is B's Acquire with a context cancelled (cause
// errGiveUp) after d.
func acquireCancelled(t *testing.T, b Client, d time.Duration) (recipe.Lease, error) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := time.AfterFunc(d, func() { cancel(errGiveUp) })
	defer func() { stop.Stop(); cancel(nil) }()
	return acquireWithin(t, "B", b, ctx)
}

// cancelOnFreeLock: the lock is free: B's attempts, cancelled or given a
// deadline at assorted moments, are often granted while in flight. An
// error from Acquire leaves nothing behind by the time it returns, so C is
// granted right after each.
func (s *suite) cancelOnFreeLock(t *testing.T, lock string, b, c Client) {
	blocked := 0
	for i := 0; i < 32; i++ {
		after := time.Duration(i/2) * 500 * time.Microsecond
		var l recipe.Lease
		var err error
		want := error(errGiveUp)
		if i%2 == 0 {
			l, err = acquireCancelled(t, b, after)
		} else {
			want = context.DeadlineExceeded
			dctx, dcancel := context.WithTimeout(context.Background(), after)
			l, err = acquireWithin(t, "B", b, dctx)
			dcancel()
		}
		if err == nil { // granted before the cancellation
			release(t, l, "B")
			continue
		}
		if !errors.Is(err, want) {
			t.Errorf("B: Acquire of a free lock, ended by its context: %v, want an error matching %v", err, want)
		}
		lc, err := c.TryAcquire(stepCtx(t))
		if err != nil {
			blocked++
			t.Errorf("C: TryAcquire right after B's cancelled Acquire returned, nobody holding: %v (B's attempt was still there)", err)
			s.expectLeftovers(t, lock, 0, "B's cancelled attempt is gone")
			continue
		}
		release(t, lc, "C")
	}
	if blocked > 0 {
		t.Logf("%d of 32 cancelled attempts still blocked the lock when Acquire returned", blocked)
	}
}

// cancelOnNewLocks: the same on locks nobody used yet, each attempt on a
// new one (for ZooKeeper the lock's directory does not exist: the create
// takes several round trips, and a cancelled attempt must still have none
// left that could land after Acquire returned).
func (s *suite) cancelOnNewLocks(t *testing.T, lock string) {
	blocked := 0
	for i := 0; i < 8; i++ {
		fresh := fmt.Sprintf("%s-fresh-%d", lock, i)
		b, c := s.h.NewClient(t, fresh), s.h.NewClient(t, fresh)
		l, err := acquireCancelled(t, b, time.Duration(i)*250*time.Microsecond)
		if err == nil {
			release(t, l, "B")
			continue
		}
		if !errors.Is(err, errGiveUp) {
			t.Errorf("B: Acquire of a new lock, cancelled: %v, want an error matching %v", err, errGiveUp)
		}
		lc, err := c.TryAcquire(stepCtx(t))
		if err != nil {
			blocked++
			t.Errorf("C: TryAcquire of %s right after B's cancelled Acquire returned, nobody holding: %v (B's attempt was still there)", fresh, err)
			s.expectLeftovers(t, fresh, 0, "B's cancelled attempt is gone")
			continue
		}
		release(t, lc, "C")
	}
	if blocked > 0 {
		t.Logf("%d of 8 cancelled attempts on new locks still blocked the lock when Acquire returned", blocked)
	}
}
