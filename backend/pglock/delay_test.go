package pglock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// delayTTL is the TTL of the lock-delay tests' sessions: shorter than
// testTTL, so that RunLockDelay's delay, which must outlast the spread of
// the lease time, keeps the test short.
const delayTTL = 2 * time.Second

// delayHarness is the harness with delayTTL and the lock-delay: a
// locktest.DelayHarness.
type delayHarness struct{ *harness }

// NewClient implements locktest.Harness with delayTTL.
func (h delayHarness) NewClient(tb testing.TB, lock string) locktest.Client {
	return h.client(tb, lock, 0)
}

// NewDelayedClient implements locktest.DelayHarness.
func (h delayHarness) NewDelayedClient(tb testing.TB, lock string, d time.Duration) locktest.Client {
	return h.client(tb, lock, d)
}

// client is a lock with delay d on a session of its own (TTL delayTTL),
// behind a FaultProxy of its own.
func (h delayHarness) client(tb testing.TB, lock string, d time.Duration) *client {
	tb.Helper()
	p := serverkit.NewFaultProxy()
	tb.Cleanup(p.Close)
	s := h.session(tb, p, WithTTL(delayTTL))
	m, err := New(s, lock, WithLockDelay(d))
	if err != nil {
		tb.Fatal(err)
	}
	return &client{Mutex: m, s: s, p: p}
}

// LeaseTime is the harness's with delayTTL and 3 s of slack: the server
// ends a crashed holder's session delayTTL after the last ping it got.
func (h delayHarness) LeaseTime() locktest.LeaseTime {
	return locktest.LeaseTime{Min: delayTTL / 2, Max: delayTTL + 3*time.Second}
}

// TestLockDelay runs the shared lock-delay properties with a delay just
// above LeaseTime.Max - Min (4 s).
func TestLockDelay(t *testing.T) {
	t.Parallel()
	h := delayHarness{newHarness(t)}
	lt := h.LeaseTime()
	locktest.RunLockDelay(t, h, lt.Max-lt.Min+500*time.Millisecond)
}

// shortDelay is the delay of the backend-specific tests: they end the
// holder at once (pg_terminate_backend, a killed connection), so no lease
// time needs to be outlasted.
const shortDelay = 500 * time.Millisecond

// delayed returns a Mutex of lock with delay d on a session of its own.
func (h *harness) delayed(t *testing.T, lock string, d time.Duration) *Mutex {
	t.Helper()
	m, err := New(h.session(t, serverkit.NewFaultProxy()), lock, WithLockDelay(d))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// plain returns a Mutex of lock without a lock-delay on a session of its own.
func (h *harness) plain(t *testing.T, lock string) *Mutex {
	t.Helper()
	m, err := New(h.session(t, serverkit.NewFaultProxy()), lock)
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

// TestLockDelayCases are the backend's own lock-delay cases, at once on one
// database, each on a lock of its own (the harness's terminate ends only
// the holder of its lock).
func TestLockDelayCases(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, c := range []struct {
		name string
		test func(*testing.T, *harness)
	}{
		{"Option", testOption},
		{"Terminated", testTerminated},
		{"Killed", testKilled},
		{"CleanHandoffs", testCleanHandoffs},
		{"FailedRelease", testFailedRelease},
		{"Rest", testRest},
		{"Mixed", testMixed},
		{"GiveUpAfterBump", testGiveUpAfterBump},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.test(t, h)
		})
	}
}

// testOption: a bad delay is refused with recipe.ErrBadOption.
func testOption(t *testing.T, h *harness) {
	s := h.session(t, serverkit.NewFaultProxy())
	for _, d := range []time.Duration{-time.Second, recipe.MaxLockDelay + 1} {
		if _, err := New(s, "x", WithLockDelay(d)); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("WithLockDelay(%v): %v, want recipe.ErrBadOption", d, err)
		}
	}
	if _, err := New(s, "x", WithLockDelay(recipe.MaxLockDelay), nil); err != nil {
		t.Errorf("WithLockDelay(MaxLockDelay) and a nil option: %v", err)
	}
}

// testTerminated: an operator's pg_terminate_backend of the
// holder's server session is an unclean end: the next Acquire, already
// waiting, is granted no sooner than the delay after it; a TryAcquire
// meanwhile answers ErrLocked.
func testTerminated(t *testing.T, h *harness) {
	const lock = "delay-terminated"
	a, b := h.delayed(t, lock, shortDelay), h.delayed(t, lock, shortDelay)
	mustAcquire(t, a)
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
	mustRelease(t, r.lease)
}

// testKilled: a holder process killed with SIGKILL (its kernel closes the
// connection, the server frees the lock at once) ended uncleanly: the
// waiting contender is granted no sooner than the delay after the kill.
func testKilled(t *testing.T, h *harness) {
	const lock = "delay-killed"
	child, _ := startChild(t, "hold-delayed", h.dsn, lock)
	pb := acquireAsync(t, h.delayed(t, lock, shortDelay), context.Background())
	h.waitLocks(t, lock, 2)
	killed := time.Now()
	child.Process.Kill()
	r := awaitResult(t, pb, opTimeout, "B after the holder's process was killed")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if took, got := r.at.Sub(killed), recipe.LockDelayServed(r.lease); took < shortDelay || got <= 0 || got > shortDelay {
		t.Errorf("granted %v after the kill having served %v: want no sooner than the delay %v", took, got, shortDelay)
	}
	mustRelease(t, r.lease)
}

// testCleanHandoffs is the race of Release's clear and unlock with
// the next grant's bump: the waiter is granted inside Release's statement,
// before its transaction commits, and its bump must wait for the cleared
// row. Twenty handoffs to a queued waiter serve no delay.
func testCleanHandoffs(t *testing.T, h *harness) {
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

// testFailedRelease: a Release whose statement cannot reach the
// server (the holder is cut off) leaves the record: the unsafe direction,
// a lock freed with no clean record, only makes the next grant wait.
func testFailedRelease(t *testing.T, h *harness) {
	const lock = "delay-failed-release"
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	a, err := New(h.session(t, p, WithTTL(MinTTL)), lock, WithLockDelay(shortDelay)) // Release gives up sooner
	if err != nil {
		t.Fatal(err)
	}
	la := mustAcquire(t, a)
	p.Blackhole()
	if err := la.Release(context.Background()); err == nil {
		t.Fatal("Release through a cut-off connection succeeded")
	}
	d, _ := served(t, h.delayed(t, lock, shortDelay), time.Now())
	if d <= 0 {
		t.Errorf("the grant after a failed Release served no delay")
	}
}

// testRest: whoever gives the grant up while the delay is pending
// keeps its start: a TryAcquire that found it (ErrLocked), and a waiter
// whose server session is terminated while it serves it. The next
// contender serves only the rest, counted from the first observation.
func testRest(t *testing.T, h *harness) {
	const lock = "delay-rest"
	// d leaves B, terminated d/3 after the delay began, several ping
	// intervals (testTTL/10) of the delay to notice it in, and C time to
	// bump before the delay is over on a loaded machine (C's session is
	// made first).
	const d = 3 * time.Second
	a, b, c := h.delayed(t, lock, d), h.delayed(t, lock, d), h.delayed(t, lock, d)
	mustAcquire(t, a)
	h.terminate(t, a) // A's end is observed by the TryAcquire next
	start := time.Now()
	if _, err := b.TryAcquire(context.Background()); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire on a pending delay: %v, want recipe.ErrLocked", err)
	}
	triedAt, tried := time.Now(), h.counter(t, lock) // the delay began at the TryAcquire's bump, before triedAt
	pb := acquireAsync(t, b, context.Background())
	// B serves the delay once its bump is in (a loaded machine once let
	// d/3 pass before B had even taken the advisory lock).
	waitFor(t, func() bool { return h.counter(t, lock) > tried }, "B's token bump")
	time.Sleep(time.Until(triedAt.Add(d / 3)))
	h.terminate(t, b) // B is serving the delay (it holds the advisory lock)
	if r := awaitResult(t, pb, opTimeout, "B, terminated during the delay"); !errors.Is(r.err, recipe.ErrSessionLost) {
		t.Fatalf("B's Acquire after its session was terminated during the delay: %v, %v; want recipe.ErrSessionLost", r.lease, r.err)
	}
	got, took := served(t, c, start)
	if took < d || got <= 0 || got > d-d/3 {
		t.Errorf("C granted %v after the delay began, having served %v: want no sooner than %v, only the rest", took, got, d)
	}
	if got, _ := served(t, b, time.Now()); got != 0 {
		t.Errorf("a grant after the served delay and a clean Release served %v", got)
	}
}

// counter returns the token counter of lock's row in the default token
// table.
func (h *harness) counter(t *testing.T, lock string) uint64 {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	rows, err := query(context.Background(), h.adm, "SELECT n FROM "+DefaultTable+" WHERE key = $1", strconv.FormatInt(Key(lock), 10))
	if err != nil || len(rows) != 1 {
		t.Fatalf("the token row of %q: %v, %d rows", lock, err, len(rows))
	}
	n, err := strconv.ParseUint(string(rows[0][0]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// testMixed: a lock without the option never waits, also right
// after an unclean end of a holder with it, and its grant erases that
// record; its own unclean end leaves no record for anyone to serve.
func testMixed(t *testing.T, h *harness) {
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

// testGiveUpAfterBump: an Acquire that gives its grant up after the bump
// with no delay pending (its ctx ended right after it) clears its mark
// (unmark, in drop) before it unlocks: the next grant serves no delay.
func testGiveUpAfterBump(t *testing.T, h *harness) {
	const lock = "delay-give-up"
	m := h.delayed(t, lock, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	w := &waitMark{m: m}
	if _, err := m.enter(ctx, false, w); err != nil {
		t.Fatal(err)
	}
	c, err := m.s.dialLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.take(ctx, c, false, w); err != nil {
		t.Fatal(err)
	}
	rec, err := m.read(ctx, c)
	if err != nil || rec.pending {
		t.Fatalf("bump: %+v, %v", rec, err)
	}
	m.drop(c, rec)
	if d, _ := served(t, m, time.Now()); d != 0 {
		t.Errorf("the grant after one given up before it was handed out served %v", d)
	}
}
