package pglock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/recipe/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// NewDelayedClient makes the harness a locktest.DelayHarness.
func (h *harness) NewDelayedClient(tb testing.TB, lock string, d time.Duration) locktest.Client {
	tb.Helper()
	p := zktest.NewFaultProxy()
	tb.Cleanup(p.Close)
	s := h.session(tb, p, h.opts...)
	m, err := New(s, lock, WithLockDelay(d))
	if err != nil {
		tb.Fatal(err)
	}
	return &client{Mutex: m, s: s, p: p}
}

// TestLockDelay runs the shared lock-delay properties; the delay must
// exceed the harness's LeaseTime.Max - Min (7 s).
func TestLockDelay(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	lt := h.LeaseTime()
	locktest.RunLockDelay(t, h, lt.Max-lt.Min+500*time.Millisecond)
}

// shortDelay is the delay of the backend-specific tests: they end the
// holder at once (pg_terminate_backend, a killed connection), so no lease
// time needs to be outlasted.
const shortDelay = 1500 * time.Millisecond

// delayed returns a Mutex of lock with delay d on a session of its own.
func (h *harness) delayed(t *testing.T, lock string, d time.Duration) *Mutex {
	t.Helper()
	m, err := New(h.session(t, zktest.NewFaultProxy()), lock, WithLockDelay(d))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// plain returns a Mutex of lock without a lock-delay on a session of its own.
func (h *harness) plain(t *testing.T, lock string) *Mutex {
	t.Helper()
	m, err := New(h.session(t, zktest.NewFaultProxy()), lock)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// served acquires m and returns the delay its grant served and the time
// from start to the grant.
func served(t *testing.T, m *Mutex, start time.Time) (time.Duration, time.Duration) {
	t.Helper()
	l := mustAcquire(t, m)
	took := time.Since(start)
	d := recipe.LockDelayServed(l)
	mustRelease(t, l)
	return d, took
}

func TestLockDelayOption(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.session(t, zktest.NewFaultProxy())
	for _, d := range []time.Duration{-time.Second, recipe.MaxLockDelay + 1} {
		if _, err := New(s, "x", WithLockDelay(d)); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("WithLockDelay(%v): %v, want recipe.ErrBadOption", d, err)
		}
	}
	if _, err := New(s, "x", WithLockDelay(recipe.MaxLockDelay), nil); err != nil {
		t.Errorf("WithLockDelay(MaxLockDelay) and a nil option: %v", err)
	}
}

// TestLockDelayTerminated: an operator's pg_terminate_backend of the
// holder's server session is an unclean end: the next Acquire, already
// waiting, is granted no sooner than the delay after it; a TryAcquire
// meanwhile answers ErrLocked. Then a clean Release hands over at once.
func TestLockDelayTerminated(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const lock = "delay-terminated"
	a, b := h.delayed(t, lock, shortDelay), h.delayed(t, lock, shortDelay)
	la := mustAcquire(t, a)
	pb := acquireAsync(t, b, context.Background())
	h.waitLocks(t, lock, 2)
	start := time.Now()
	h.terminate(t, a)
	time.Sleep(shortDelay / 3)
	if _, err := h.delayed(t, lock, shortDelay).TryAcquire(context.Background()); !errors.Is(err, recipe.ErrLocked) {
		t.Errorf("TryAcquire while the delay is served: %v, want recipe.ErrLocked", err)
	}
	r := awaitResult(t, pb, opTimeout, "B after A's termination")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if took := r.at.Sub(start); took < shortDelay {
		t.Errorf("B granted %v after A's termination, sooner than the delay %v", took, shortDelay)
	}
	if got := recipe.LockDelayServed(r.lease); got <= 0 || got > shortDelay {
		t.Errorf("LockDelayServed = %v, want in (0, %v]", got, shortDelay)
	}
	<-la.Context().Done()
	pa := acquireAsync(t, a, context.Background())
	h.waitLocks(t, lock, 2)
	released := time.Now()
	mustRelease(t, r.lease)
	r = awaitResult(t, pa, opTimeout, "A after B's Release")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if took, got := time.Since(released), recipe.LockDelayServed(r.lease); got != 0 || took >= shortDelay {
		t.Errorf("after a clean Release: granted in %v having served %v, want at once and none", took, got)
	}
	mustRelease(t, r.lease)
}

// TestLockDelayCleanHandoffs is the race of Release's clear and unlock with
// the next grant's bump: the waiter is granted inside Release's statement,
// before its transaction commits, and its bump must wait for the cleared
// row. Twenty handoffs to a queued waiter serve no delay.
func TestLockDelayCleanHandoffs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const lock = "delay-handoffs"
	ms := [2]*Mutex{h.delayed(t, lock, time.Minute), h.delayed(t, lock, time.Minute)}
	l := mustAcquire(t, ms[0])
	for i := 1; i <= 20; i++ {
		next := acquireAsync(t, ms[i%2], context.Background())
		h.waitLocks(t, lock, 2)
		mustRelease(t, l)
		r := awaitResult(t, next, opTimeout, "the waiter after a clean Release")
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := recipe.LockDelayServed(r.lease); got != 0 {
			t.Fatalf("handoff %d: served %v after a clean Release", i, got)
		}
		l = r.lease
	}
	mustRelease(t, l)
}

// TestLockDelayFailedRelease: a Release whose statement cannot reach the
// server (the holder is cut off) leaves the record: the unsafe direction,
// a lock freed with no clean record, only makes the next grant wait.
func TestLockDelayFailedRelease(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const lock = "delay-failed-release"
	a := h.NewDelayedClient(t, lock, shortDelay).(*client)
	la, err := a.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a.CutOff()
	if err := la.Release(context.Background()); err == nil {
		t.Fatal("Release through a cut-off connection succeeded")
	}
	d, _ := served(t, h.delayed(t, lock, shortDelay), time.Now())
	if d <= 0 {
		t.Errorf("the grant after a failed Release served no delay")
	}
}

// TestLockDelayRest: whoever gives the grant up while the delay is pending
// keeps its start: a TryAcquire that found it (ErrLocked), and a waiter
// whose server session is terminated while it serves it. The next
// contender serves only the rest, counted from the first observation.
func TestLockDelayRest(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const lock = "delay-rest"
	const d = 3 * time.Second
	a, b := h.delayed(t, lock, d), h.delayed(t, lock, d)
	mustAcquire(t, a)
	h.terminate(t, a) // A's end is observed by the TryAcquire next
	start := time.Now()
	if _, err := b.TryAcquire(context.Background()); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire on a pending delay: %v, want recipe.ErrLocked", err)
	}
	pb := acquireAsync(t, b, context.Background())
	time.Sleep(d / 3)
	h.terminate(t, b) // B is serving the delay (it holds the advisory lock)
	if r := awaitResult(t, pb, opTimeout, "B, terminated during the delay"); !errors.Is(r.err, recipe.ErrSessionLost) {
		t.Fatalf("B's Acquire after its session was terminated during the delay: %v, %v; want recipe.ErrSessionLost", r.lease, r.err)
	}
	got, took := served(t, h.delayed(t, lock, d), start)
	if took < d || got <= 0 || got > d-d/3 {
		t.Errorf("C granted %v after the delay began, having served %v: want no sooner than %v, only the rest", took, got, d)
	}
	if l := mustAcquire(t, b); recipe.LockDelayServed(l) != 0 {
		t.Errorf("a grant after the served delay and a clean Release served %v", recipe.LockDelayServed(l))
	}
}

// TestLockDelayMixed: a lock without the option never waits, also right
// after an unclean end of a holder with it, and its grant erases that
// record; its own unclean end leaves no record for anyone to serve.
func TestLockDelayMixed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const lock = "delay-mixed"
	dl, pl := h.delayed(t, lock, time.Minute), h.plain(t, lock)
	mustAcquire(t, dl)
	h.terminate(t, dl)
	if d, took := served(t, pl, time.Now()); d != 0 || took > opTimeout/3 {
		t.Errorf("a lock without the option after an unclean end: served %v, took %v", d, took)
	}
	if d, _ := served(t, dl, time.Now()); d != 0 {
		t.Errorf("after a grant without the option: served %v of a stale record", d)
	}
	mustAcquire(t, pl)
	h.terminate(t, pl)
	if d, _ := served(t, dl, time.Now()); d != 0 {
		t.Errorf("after the unclean end of a holder without the option: served %v", d)
	}
}

// TestLockDelayOldTable: a token table made before the lock-delay (no
// held, unclean_at) gets its columns at Connect when the role owns it;
// when it can't (an administrator's table), Connect still succeeds, a lock
// without the option works, and New with it fails with ErrTokenTable
// naming the statement to run.
func TestLockDelayOldTable(t *testing.T) {
	t.Parallel()
	f := newTrustFixture(t)
	const old = " (key bigint PRIMARY KEY, name text NOT NULL, n bigint NOT NULL CHECK (n > 0))"
	asApp := f.conn(t, f.app)
	f.exec(t, asApp, "CREATE TABLE public.mine"+old+"; INSERT INTO public.mine VALUES ("+strconv.FormatInt(Key("x"), 10)+", 'x', 7)")
	s, err := f.connect(t, WithTable("mine"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(s, "x", WithLockDelay(time.Second))
	if err != nil {
		t.Fatalf("New with the option on a migrated table: %v", err)
	}
	if l := mustAcquire(t, m); l.Token() != 8 {
		t.Errorf("token %v after the migration, want 8", l.Token())
	} else {
		mustRelease(t, l)
	}

	f.exec(t, f.adm, "CREATE TABLE public.admins"+old+"; GRANT SELECT, INSERT, UPDATE ON public.admins TO "+f.app)
	s, err = f.connect(t, WithTable("admins"))
	if err != nil {
		t.Fatalf("Connect to an older table it can't change: %v", err)
	}
	tokens(t, s, 2, nil) // "victim" without the option
	if _, err := New(s, "x", WithLockDelay(time.Second)); !errors.Is(err, ErrTokenTable) || !strings.Contains(err.Error(), "ALTER TABLE") {
		t.Errorf("New with the option on an older table: %v; want ErrTokenTable with the ALTER TABLE", err)
	}
}
