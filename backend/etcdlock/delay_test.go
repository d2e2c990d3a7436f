package etcdlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/metricstest"
)

// NewDelayedClient makes the harness a locktest.DelayHarness.
func (h *harness) NewDelayedClient(tb testing.TB, lock string, d time.Duration) locktest.Client {
	tb.Helper()
	s, p := h.e.connect(tb)
	m, err := etcdlock.New(s, "locktest/"+lock, etcdlock.WithLockDelay(d))
	if err != nil {
		tb.Fatal(err)
	}
	return &lockClient{Mutex: m, p: p}
}

// TestLockDelay runs the shared lock-delay properties. The delay must
// exceed LeaseTime.Max - Min (6.5 s); the subtests run in parallel (about
// 11 s in all).
func TestLockDelay(t *testing.T) {
	t.Parallel()
	locktest.RunLockDelay(t, &harness{e: newEnv(t)}, 7*time.Second)
}

func TestLockDelayOption(t *testing.T) {
	t.Parallel()
	s, _ := newEnv(t).connect(t)
	for _, d := range []time.Duration{-time.Second, recipe.MaxLockDelay + 1} {
		if _, err := etcdlock.New(s, "x", etcdlock.WithLockDelay(d)); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("WithLockDelay(%v): %v, want recipe.ErrBadOption", d, err)
		}
	}
	if _, err := etcdlock.New(s, "x", etcdlock.WithLockDelay(recipe.MaxLockDelay), nil); err != nil {
		t.Errorf("WithLockDelay(MaxLockDelay) and a nil option: %v", err)
	}
}

// shortDelay is the delay of the backend-specific tests: short, and not a
// whole number of seconds (the serving key's etcd lease has one of its own).
const shortDelay = 1500 * time.Millisecond

// delayed returns the lock name on a new Session with shortDelay.
func (e *env) delayed(t *testing.T, name string) (*etcdlock.Mutex, *etcdlock.Session) {
	t.Helper()
	s, _ := e.connect(t)
	m, err := etcdlock.New(s, name, etcdlock.WithLockDelay(shortDelay))
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// record returns the value of the lock-delay key suffix of lock name ("" if
// absent), through the inspector.
func (e *env) record(t *testing.T, name, suffix string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := e.in.Get(ctx, e.prefix+"/"+name+"/"+suffix)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// holderKey returns the one contender key of lock name.
func (e *env) holderKey(t *testing.T, name string) string {
	t.Helper()
	resp, err := e.in.Get(context.Background(), e.prefix+"/"+name+"/_lock_", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the keys of %s: %v (%d keys), want one", name, err, len(resp.Kvs))
	}
	return string(resp.Kvs[0].Key)
}

// acquireWithin acquires m, failing the test after limit.
func acquireWithin(t *testing.T, m *etcdlock.Mutex, limit time.Duration, who string) (recipe.Lease, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	l, err := m.Acquire(ctx)
	if err != nil {
		t.Fatalf("%s: Acquire: %v", who, err)
	}
	return l, time.Now()
}

// checkServed checks a grant at granted that followed an unclean end at
// ended: no sooner than the delay after it, having served one.
func checkServed(t *testing.T, l recipe.Lease, granted, ended time.Time, who string) {
	t.Helper()
	if after := granted.Sub(ended); after < shortDelay {
		t.Errorf("%s granted %v after the unclean end, sooner than the delay %v", who, after, shortDelay)
	}
	if got := recipe.LockDelayServed(l); got <= 0 || got > shortDelay {
		t.Errorf("%s: LockDelayServed = %v, want in (0, %v]", who, got, shortDelay)
	}
}

// TestLockDelayRecord: an uncontended grant records its key as the holder
// in the transaction of its put, a clean Release deletes the record with
// the key, and the next grant serves nothing.
func TestLockDelayRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "record"
	a, _ := e.delayed(t, name)
	la, _ := acquireWithin(t, a, 10*time.Second, "A")
	if got, want := e.record(t, name, "_lockdelay_held"), e.holderKey(t, name); got != want {
		t.Errorf("held record = %q, want the holder's key %q", got, want)
	}
	releaseOK(t, la)
	if got := e.record(t, name, "_lockdelay_held"); got != "" {
		t.Errorf("held record after a clean Release = %q, want none", got)
	}
	start := time.Now()
	lb, _ := acquireWithin(t, a, 10*time.Second, "B")
	if took := time.Since(start); took >= shortDelay || recipe.LockDelayServed(lb) != 0 {
		t.Errorf("after a clean Release the next grant took %v and served %v, want at once and none", took, recipe.LockDelayServed(lb))
	}
	releaseOK(t, lb)
	e.expectKeys(t, name, 0, "all released")
}

// TestLockDelayOperatorDelete: the holder's key deleted by someone else is
// an unclean end: the holder's context ends (ErrNodeDeleted), its Release
// says so, and the waiter serves the delay from the delete.
func TestLockDelayOperatorDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "operator"
	a, _ := e.delayed(t, name)
	dm := &delayMetrics{Events: &metricstest.Events{}}
	sb, _ := e.connect(t, etcdlock.WithMetrics(dm))
	b, err := etcdlock.New(sb, name, etcdlock.WithLockDelay(shortDelay))
	if err != nil {
		t.Fatal(err)
	}
	la, _ := acquireWithin(t, a, 10*time.Second, "A")
	key := e.holderKey(t, name)
	pb := acquireAsync(opCtx(t), b)
	time.Sleep(300 * time.Millisecond) // B in line
	deleted := time.Now()
	if _, err := e.in.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	r := granted(t, pb, 15*time.Second, "B")
	checkServed(t, r.lease, r.at, deleted, "B")
	if got := dm.served(); len(got) != 1 || got[0] != recipe.LockDelayServed(r.lease) {
		t.Errorf("DelayMetrics.LockDelayServed calls: %v, want one with %v", got, recipe.LockDelayServed(r.lease))
	}
	if cause := context.Cause(la.Context()); !errors.Is(cause, recipe.ErrNodeDeleted) {
		t.Errorf("A's cause = %v, want recipe.ErrNodeDeleted", cause)
	}
	if err := la.Release(context.Background()); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("A's Release after the delete: %v, want recipe.ErrLeaseLost", err)
	}
	releaseOK(t, r.lease)
	e.expectKeys(t, name, 0, "all released")
}

// TestLockDelayReleaseCutOff: the marker race of the clean end. A Release
// that cannot reach the server (cut off: its delete, which carries the
// record's, is never applied) leaves the record, so the end is unclean:
// the next grant serves the delay after the etcd lease expired.
func TestLockDelayReleaseCutOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "release-cut"
	sa, pa := e.connect(t, etcdlock.WithCleanupTimeout(500*time.Millisecond))
	a, err := etcdlock.New(sa, name, etcdlock.WithLockDelay(shortDelay))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := e.delayed(t, name)
	la, _ := acquireWithin(t, a, 10*time.Second, "A")
	pb := acquireAsync(opCtx(t), b)
	time.Sleep(300 * time.Millisecond) // B in line
	pa.Blackhole()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	err = la.Release(ctx)
	cancel()
	if err == nil {
		t.Fatal("A's Release while cut off returned nil")
	}
	r := granted(t, pb, 20*time.Second, "B")
	if got := recipe.LockDelayServed(r.lease); got <= 0 || got > shortDelay {
		t.Errorf("B after a Release that never reached the server: LockDelayServed = %v, want in (0, %v]", got, shortDelay)
	}
	releaseOK(t, r.lease)
	pa.Resume()
	e.expectKeys(t, name, 0, "all released")
}

// TestLockDelayLateArrival: an unclean end that nobody in line saw (the
// holder crashed, its etcd lease expired with no waiter) is found by the
// next contender: a TryAcquire answers ErrLocked and starts the delay,
// every TryAcquire answers ErrLocked until it ends, then one is granted.
func TestLockDelayLateArrival(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "late"
	sa, pa := e.connect(t)
	a, err := etcdlock.New(sa, name, etcdlock.WithLockDelay(shortDelay))
	if err != nil {
		t.Fatal(err)
	}
	acquireWithin(t, a, 10*time.Second, "A")
	pa.Close()                 // A crashes; its key goes with its etcd lease
	e.waitNoContender(t, name) // A's etcd lease expired; its record stays
	b, _ := e.delayed(t, name)
	ctx := context.Background()
	if _, err := b.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire after an unclean end nobody served: %v, want recipe.ErrLocked", err)
	}
	started := time.Now()
	for {
		l, err := b.TryAcquire(ctx)
		if err == nil {
			if after := time.Since(started); after < shortDelay {
				t.Errorf("TryAcquire granted %v after the delay started, sooner than %v", after, shortDelay)
			}
			releaseOK(t, l)
			break
		}
		if !errors.Is(err, recipe.ErrLocked) {
			t.Fatalf("TryAcquire during the delay: %v, want recipe.ErrLocked", err)
		}
		if time.Since(started) > shortDelay+5*time.Second {
			t.Fatalf("TryAcquire still refused %v after the delay started", time.Since(started))
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.expectKeys(t, name, 0, "all released")
}

// TestLockDelayServerCrash: the contender serving the delay crashes in the
// middle of it; the serving key keeps the delay's end on the server, so
// the next contender is granted no sooner than the delay after the holder's
// end, and serves only what remains.
func TestLockDelayServerCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "serving-crash"
	const d = 6 * time.Second // longer than the etcd lease of the crashed contender takes to expire
	conn := func() (*etcdlock.Mutex, func()) {
		s, p := e.connect(t)
		m, err := etcdlock.New(s, name, etcdlock.WithLockDelay(d))
		if err != nil {
			t.Fatal(err)
		}
		return m, p.Close
	}
	a, crashA := conn()
	b, crashB := conn()
	c, _ := conn()
	acquireWithin(t, a, 10*time.Second, "A")
	pb := acquireAsync(opCtx(t), b)
	time.Sleep(300 * time.Millisecond) // B in line
	pc := acquireAsync(opCtx(t), c)
	time.Sleep(300 * time.Millisecond) // C behind B
	crashA()
	// B serves the delay once A's key has gone; it crashes in the middle.
	e.waitRecord(t, name, "_lockdelay_serving")
	served := time.Now()
	crashB()
	r := granted(t, pc, 30*time.Second, "C")
	if after := r.at.Sub(served); after < d-500*time.Millisecond {
		t.Errorf("C granted %v after the delay started, sooner than the delay %v", after, d)
	}
	// C serves the rest, unless B's etcd lease took the whole delay to expire.
	t.Logf("C granted %v after the delay started, serving %v", r.at.Sub(served), recipe.LockDelayServed(r.lease))
	if got := recipe.LockDelayServed(r.lease); got >= d {
		t.Errorf("C: LockDelayServed = %v, want the rest of the delay, under %v", got, d)
	}
	select {
	case r := <-pb:
		if r.err == nil {
			t.Errorf("B, crashed, was granted")
		}
	default:
	}
	releaseOK(t, r.lease)
	e.expectKeys(t, name, 0, "all released")
}

// TestLockDelayDefaultNeverWaits: a Mutex without the option neither waits
// for a lock-delay nor reads its keys, even on a lock whose holder with
// the option ended uncleanly.
func TestLockDelayDefaultNeverWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "default"
	a, _ := e.delayed(t, name)
	sb, _ := e.connect(t)
	b := mutex(t, sb, name)
	la, _ := acquireWithin(t, a, 10*time.Second, "A")
	key := e.holderKey(t, name)
	pb := acquireAsync(opCtx(t), b)
	time.Sleep(300 * time.Millisecond) // B in line
	deleted := time.Now()
	if _, err := e.in.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	r := granted(t, pb, 10*time.Second, "B")
	if took := r.at.Sub(deleted); took >= shortDelay || recipe.LockDelayServed(r.lease) != 0 {
		t.Errorf("B without the option granted %v after the holder's unclean end, serving %v: want at once, none", took, recipe.LockDelayServed(r.lease))
	}
	_ = la.Release(context.Background())
	releaseOK(t, r.lease)
	if got := e.record(t, name, "_lockdelay_held"); got == "" {
		t.Errorf("the record of A's unclean end is gone: B without the option must not touch it")
	}
	if _, err := e.in.Delete(context.Background(), e.prefix+"/"+name+"/_lockdelay_", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
}

// granted awaits a grant on ch within d.
func granted(t *testing.T, ch <-chan result, d time.Duration, who string) result {
	t.Helper()
	r := await(t, ch, d, who)
	if r.err != nil {
		t.Fatalf("%s: Acquire: %v", who, r.err)
	}
	return r
}

// releaseOK releases l, failing the test on an error.
func releaseOK(t *testing.T, l recipe.Lease) {
	t.Helper()
	if err := l.Release(opCtx(t)); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// waitRecord waits until the lock-delay key suffix of lock name exists.
func (e *env) waitRecord(t *testing.T, name, suffix string) {
	t.Helper()
	deadline := time.Now().Add(2 * (testTTL + 5*time.Second))
	for e.record(t, name, suffix) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no %s key for lock %s", suffix, name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitNoContender waits until lock name has no contender key.
func (e *env) waitNoContender(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(2 * (testTTL + 5*time.Second))
	for {
		resp, err := e.in.Get(opCtx(t), e.prefix+"/"+name+"/_lock_", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock %s still has %d contender keys", name, resp.Count)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// delayMetrics is a Metrics that also records recipe.DelayMetrics calls.
type delayMetrics struct {
	*metricstest.Events
	mu sync.Mutex
	ds []time.Duration
}

func (m *delayMetrics) LockDelayServed(kind, dir string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ds = append(m.ds, d)
}

func (m *delayMetrics) served() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Duration(nil), m.ds...)
}
