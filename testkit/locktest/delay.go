package locktest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// DelayHarness is a Harness whose clients can also be made with the
// backend's lock-delay option, for RunLockDelay.
type DelayHarness interface {
	Harness
	// NewDelayedClient is NewClient with the lock's lock-delay set to d.
	NewDelayedClient(tb testing.TB, lock string, d time.Duration) Client
}

// RunLockDelay checks the lock-delay (recipe.LockDelayServed) of the
// backend behind h with delay d, each property in a subtest, all at once:
//
//   - CleanReleaseServesNone: after a Release, the waiter is granted at
//     once (sooner than d), and its grant served no delay.
//   - CrashServesDelay: after the holder crashed, the waiter is granted no
//     sooner than LeaseTime.Min + d after the crash and no later than
//     LeaseTime.Max + d, having served a delay in (0, d]; meanwhile every
//     TryAcquire of another client answers ErrLocked.
//   - CutOffServesDelay: after the holder was cut off, the waiter is
//     granted no sooner than d after the holder's lease context ended.
//   - AbandonKeepsDelay: a waiter that gives up while serving the delay
//     (its context ends) gets its context's cause, leaves nothing behind,
//     and does not shorten the delay: the next waiter is granted no sooner
//     than LeaseTime.Min + d after the crash, and no later than one more
//     delay after that.
//
// d must exceed LeaseTime.Max - LeaseTime.Min, so that a waiter is still
// serving the delay at LeaseTime.Max after a crash (when the abandoning
// waiter gives up).
func RunLockDelay(t *testing.T, h DelayHarness, d time.Duration) {
	t.Helper()
	lt := h.LeaseTime()
	if lt.Max <= 0 || lt.Min < 0 || lt.Min >= lt.Max {
		t.Fatalf("locktest: invalid LeaseTime %+v: need 0 <= Min < Max", lt)
	}
	if d <= lt.Max-lt.Min {
		t.Fatalf("locktest: RunLockDelay(%v): need a delay above LeaseTime.Max - Min = %v", d, lt.Max-lt.Min)
	}
	s := &delaySuite{suite: suite{h: h, lt: lt}, h: h, d: d}
	// The properties mostly wait (for an expiry, then the delay): they run
	// at once, each in a subtest of its own started from its own goroutine,
	// so that go test's -parallel limit (the number of CPUs) does not queue
	// them behind each other.
	var wg sync.WaitGroup
	for _, p := range []struct {
		name  string
		check func(*delaySuite, *testing.T)
	}{
		{"CleanReleaseServesNone", (*delaySuite).cleanRelease},
		{"CrashServesDelay", (*delaySuite).crash},
		{"CutOffServesDelay", (*delaySuite).cutOff},
		{"AbandonKeepsDelay", (*delaySuite).abandon},
	} {
		wg.Go(func() { t.Run(p.name, func(t *testing.T) { p.check(s, t) }) })
	}
	wg.Wait()
}

type delaySuite struct {
	suite
	h DelayHarness
	d time.Duration
}

// inLine gives an Acquire just started time to get in line (a backend
// that does not queue waiters stores no entry to wait for). Only the order
// of the waiters depends on it, and every check holds in either order.
func inLine() { time.Sleep(300 * time.Millisecond) }

// client makes a client of lock with the suite's delay.
func (s *delaySuite) client(t *testing.T, lock string) Client {
	return s.h.NewDelayedClient(t, lock, s.d)
}

// waitLonger bounds a wait that includes an expiry and a delay.
func (s *delaySuite) waitLonger() time.Duration { return s.expiryWait() + 2*s.d }

// acquireAsync is suite.acquireAsync with room for the delay, under ctx.
func (s *delaySuite) acquireAsync(t *testing.T, c Client, ctx context.Context) pending {
	t.Helper()
	return startAcquire(t, c, ctx, s.waitLonger(), nil)
}

func (s *delaySuite) cleanRelease(t *testing.T) {
	const lock = "delay-clean"
	a, b := s.client(t, lock), s.client(t, lock)
	la := s.acquire(t, a, "A")
	pb := s.acquireAsync(t, b, context.Background())
	s.expectLeftovers(t, lock, 2, "A holds, B waits") // B is in line before A lets go
	released := time.Now()
	release(t, la, "A")
	r := await(t, pb, OpTimeout, "B, after A's Release")
	if took := r.at.Sub(released); took >= s.d {
		t.Errorf("B was granted %v after A's clean Release: a clean end serves no lock-delay (%v)", took, s.d)
	}
	if got := recipe.LockDelayServed(r.lease); got != 0 {
		t.Errorf("LockDelayServed after a clean Release = %v, want 0", got)
	}
	release(t, r.lease, "B")
	s.expectLeftovers(t, lock, 0, "both released")
}

func (s *delaySuite) crash(t *testing.T) {
	const lock = "delay-crash"
	a, b, c := s.client(t, lock), s.client(t, lock), s.client(t, lock)
	s.acquire(t, a, "A")
	pb := s.acquireAsync(t, b, context.Background())
	inLine() // A holds, B waits
	crashed := time.Now()
	a.Crash()
	var granted atomic.Bool
	stop := probe(t, c, &granted)
	r := await(t, pb, s.waitLonger(), "B, after the holder crashed")
	stop()
	if granted.Load() {
		t.Errorf("C's TryAcquire was granted between the crash and B's grant: the lock must not be free while the delay is served")
	}
	s.checkDelayed(t, r, crashed)
	release(t, r.lease, "B")
	s.expectLeftovers(t, lock, 0, "the crashed holder expired, B released")
}

// checkDelayed checks a grant that followed a crash at crashed.
func (s *delaySuite) checkDelayed(t *testing.T, r result, crashed time.Time) {
	t.Helper()
	after := r.at.Sub(crashed)
	t.Logf("granted %v after the crash (lease time %v..%v, delay %v)", after.Round(time.Millisecond), s.lt.Min, s.lt.Max, s.d)
	if after < s.lt.Min+s.d {
		t.Errorf("granted %v after the holder crashed, sooner than LeaseTime.Min + delay = %v", after, s.lt.Min+s.d)
	}
	if after > s.lt.Max+s.d {
		t.Errorf("granted %v after the holder crashed, later than LeaseTime.Max + delay = %v", after, s.lt.Max+s.d)
	}
	if got := recipe.LockDelayServed(r.lease); got <= 0 || got > s.d {
		t.Errorf("LockDelayServed = %v, want in (0, %v]", got, s.d)
	}
}

// probe tries c.TryAcquire every 100 ms until stop is called, setting
// granted if one succeeds (and releasing it).
func probe(t *testing.T, c Client, granted *atomic.Bool) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			l, err := c.TryAcquire(ctx)
			if err == nil {
				granted.Store(true)
				releaseQuietly(l)
			} else if !errors.Is(err, recipe.ErrLocked) && ctx.Err() == nil {
				t.Errorf("C: TryAcquire during the delay: %v, want recipe.ErrLocked", err)
				return
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

func (s *delaySuite) cutOff(t *testing.T) {
	const lock = "delay-cutoff"
	a, b := s.client(t, lock), s.client(t, lock)
	la := s.acquire(t, a, "A")
	pb := s.acquireAsync(t, b, context.Background())
	inLine() // A holds, B waits
	ended := make(chan time.Time, 1)
	go func() { <-la.Context().Done(); ended <- time.Now() }()
	a.CutOff()
	t.Cleanup(a.Heal)
	r := await(t, pb, s.waitLonger(), "B, after the holder was cut off")
	select {
	case end := <-ended:
		if margin := r.at.Sub(end); margin < s.d {
			t.Errorf("B was granted %v after A's lease context ended: want at least the delay %v", margin, s.d)
		}
	default:
		t.Fatalf("B was granted while the cut-off holder's lease context was live")
	}
	if got := recipe.LockDelayServed(r.lease); got <= 0 || got > s.d {
		t.Errorf("LockDelayServed = %v, want in (0, %v]", got, s.d)
	}
	release(t, r.lease, "B")
	a.Heal()
	releaseQuietly(la)
	s.expectLeftovers(t, lock, 0, "the cut-off holder expired, B released")
}

func (s *delaySuite) abandon(t *testing.T) {
	const lock = "delay-abandon"
	a, b, c := s.client(t, lock), s.client(t, lock), s.client(t, lock)
	s.acquire(t, a, "A")
	bctx, giveUp := context.WithCancelCause(context.Background())
	defer giveUp(nil)
	pb := s.acquireAsync(t, b, bctx)
	inLine() // A holds, B waits
	pc := s.acquireAsync(t, c, context.Background())
	inLine() // A holds, B and C wait
	crashed := time.Now()
	a.Crash()
	// By LeaseTime.Max the lock is free and B serves the delay, which lasts
	// past it (d > Max - Min): B gives up in the middle of it.
	time.Sleep(s.lt.Max)
	errGaveUp := errors.New("waiter B gave up during the delay")
	giveUp(errGaveUp)
	select {
	case r := <-pb.ch:
		if r.err == nil {
			releaseQuietly(r.lease)
			t.Fatalf("B was granted %v after the crash, before it gave up at LeaseTime.Max: no delay served?", r.at.Sub(crashed))
		}
		if !errors.Is(r.err, errGaveUp) {
			t.Errorf("B's Acquire after its context ended: %v, want its cause", r.err)
		}
	case <-time.After(OpTimeout):
		t.Fatalf("B's Acquire did not return within %v after its context ended", OpTimeout)
	}
	r := await(t, pc, s.waitLonger(), "C, after B gave up")
	after := r.at.Sub(crashed)
	t.Logf("C granted %v after the crash", after.Round(time.Millisecond))
	if after < s.lt.Min+s.d {
		t.Errorf("C granted %v after the crash, sooner than LeaseTime.Min + delay = %v: B's giving up shortened the delay", after, s.lt.Min+s.d)
	}
	if after > s.lt.Max+2*s.d {
		t.Errorf("C granted %v after the crash, later than LeaseTime.Max + two delays = %v", after, s.lt.Max+2*s.d)
	}
	release(t, r.lease, "C")
	s.expectLeftovers(t, lock, 0, "A expired, B gave up, C released")
}
