package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// delayHarness is the locktest.DelayHarness of the Redis backend.
type delayHarness struct{ *harness }

// NewDelayedClient is NewClient with WithLockDelay(d).
func (h delayHarness) NewDelayedClient(tb testing.TB, lock string, d time.Duration) locktest.Client {
	tb.Helper()
	p := serverkit.NewFaultProxy()
	tb.Cleanup(p.Close)
	s := connect(tb, h.srv, p, h.opts...)
	return &client{Lock: mustNewDelayed(tb, s, lock, d), p: p}
}

// leftoversLua counts what a lock stores for its contenders: the lock key,
// each queued waiter, and a lock-delay marker that no longer names the
// key's holder (one that does is a part of the holder's grant).
var leftoversLua = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local n = redis.call('ZCARD', KEYS[2])
if v then
  n = n + 1
end
local mk = redis.call('GET', KEYS[3])
if mk and mk ~= 'held:' .. tostring(v) then
  n = n + 1
end
return n
`)

// Leftovers counts the lock's key, its waiters and an orphaned marker
// (leftoversLua), read directly from the server: the delay suite expects
// a waiter to count.
func (h delayHarness) Leftovers(ctx context.Context, lock string) (int, error) {
	m, err := redislock.New(h.in, lock)
	if err != nil {
		return 0, err
	}
	n, err := leftoversLua.Run(ctx, h.rdb, []string{m.Key(), m.QueueKey(), m.DelayKey()}).Int()
	return n, err
}

// LeaseTime: the grant after a crash comes the lock-delay after the key's
// expiry on the server's clock (at most the TTL after the crash), whenever
// the waiter noticed the expiry (it re-checks within a tenth of the TTL
// of it): the slack in Max is only for the client's last timer and round
// trip, and 1 s is plenty; Min as for the conformance suite. A tighter Max
// allows a shorter delay (above Max - Min): the suite runs two subtests at
// a time on 2 cores, each about the TTL + the delay.
func (h delayHarness) LeaseTime() locktest.LeaseTime {
	return locktest.LeaseTime{Min: confTTL / 2, Max: confTTL + time.Second}
}

func mustNewDelayed(tb testing.TB, s *redislock.Session, name string, d time.Duration) *redislock.Mutex {
	tb.Helper()
	m, err := redislock.New(s, name, redislock.WithLockDelay(d))
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestLockDelayConformance(t *testing.T) {
	t.Parallel()
	h := delayHarness{newHarness(t)}
	// Just above LeaseTime.Max - Min (2 s), as RunLockDelay needs.
	locktest.RunLockDelay(t, h, 2200*time.Millisecond)
}

func TestLockDelayBadOption(t *testing.T) {
	t.Parallel()
	s := connect(t, redistest.Start(t), nil)
	for _, d := range []time.Duration{-time.Millisecond, recipe.MaxLockDelay + time.Millisecond} {
		if _, err := redislock.New(s, "bad", redislock.WithLockDelay(d)); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("New with WithLockDelay(%v) = %v, want ErrBadOption", d, err)
		}
	}
	for _, o := range []redislock.MutexOption{nil, redislock.WithLockDelay(0), redislock.WithLockDelay(recipe.MaxLockDelay)} {
		if _, err := redislock.New(s, "good", o); err != nil {
			t.Errorf("New with a valid option: %v", err)
		}
	}
}

// markerOf reads m's marker: its value ("" if none) and PTTL.
func markerOf(t *testing.T, rdb *redis.Client, m *redislock.Mutex) (string, time.Duration) {
	t.Helper()
	ctx := context.Background()
	v, err := rdb.Get(ctx, m.DelayKey()).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	pttl, err := rdb.PTTL(ctx, m.DelayKey()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return v, pttl
}

// Without the option nothing waits and nothing is written: after an
// operator deleted a default holder's key, the lock is free at once, to a
// Mutex without the option and to one with it (the default holder left no
// marker to serve).
func TestLockDelayDefaultNeverWaits(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	plain := mustNew(t, connect(t, srv, nil), "default")
	delayed := mustNewDelayed(t, connect(t, srv, nil), "default", time.Minute)
	for _, next := range []*redislock.Mutex{plain, delayed} {
		la := acquire(t, plain)
		if v, _ := markerOf(t, rdb, plain); v != "" {
			t.Fatalf("a grant without the option wrote the marker %q", v)
		}
		if err := rdb.Del(ctx, plain.Key()).Err(); err != nil {
			t.Fatal(err)
		}
		lb, err := next.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("TryAcquire after a default holder's key was deleted: %v, want a grant at once", err)
		}
		if got := recipe.LockDelayServed(lb); got != 0 {
			t.Errorf("LockDelayServed = %v, want 0", got)
		}
		release(t, lb)
		_ = la.Release(ctx) // lost already, or about to be
	}
}

// A grant with the option writes the marker, expiring the delay after the
// lock key; Release deletes it in the same script, and the next grant
// serves nothing.
func TestLockDelayCleanRelease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	const d = time.Minute
	a := mustNewDelayed(t, connect(t, srv, nil), "clean", d)
	b := mustNewDelayed(t, connect(t, srv, nil), "clean", d)
	la := acquire(t, a)
	v, pttl := markerOf(t, rdb, a)
	if v != "held:"+redislock.Owner(la) || pttl <= d || pttl > confTTL+d {
		t.Errorf("marker while A holds = %q, PTTL %v; want held:<A's owner>, PTTL in (%v, %v]", v, pttl, d, confTTL+d)
	}
	release(t, la)
	if v, _ := markerOf(t, rdb, a); v != "" {
		t.Errorf("marker after a Release = %q, want none", v)
	}
	lb, err := b.TryAcquire(context.Background())
	if err != nil {
		t.Fatalf("TryAcquire after a clean Release: %v", err)
	}
	if got := recipe.LockDelayServed(lb); got != 0 {
		t.Errorf("LockDelayServed after a clean Release = %v, want 0", got)
	}
	release(t, lb)
}

// An operator's DEL of the held key is an unclean end: the holder learns
// it at its next renewal, and the next grant comes no sooner than the
// delay after the DEL (at most the TTL + the delay: the marker runs until
// the delay after the key would have expired). Meanwhile TryAcquire
// answers ErrLocked.
func TestLockDelayOperatorDelete(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	const d, ttl = 300 * time.Millisecond, redislock.MinTTL
	a := mustNewDelayed(t, connect(t, srv, nil, redislock.WithTTL(ttl)), "deleted", d)
	b := mustNewDelayed(t, connect(t, srv, nil, redislock.WithTTL(ttl)), "deleted", d)
	c := mustNewDelayed(t, connect(t, srv, nil, redislock.WithTTL(ttl)), "deleted", d)
	la := acquire(t, a)
	if err := rdb.Del(ctx, a.Key()).Err(); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	got := make(chan recipe.Lease, 1)
	go func() {
		actx, cancel := context.WithTimeout(ctx, 3*(ttl+d))
		defer cancel()
		l, err := b.Acquire(actx)
		if err != nil {
			t.Errorf("B: %v", err)
		}
		got <- l
	}()
	time.Sleep(100 * time.Millisecond) // B serves the delay
	if l, err := c.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		releaseQuietly(l)
		t.Errorf("C's TryAcquire during the delay = %v, want ErrLocked", err)
	}
	lb := <-got
	if lb == nil {
		return
	}
	after := time.Since(deleted)
	if after < d || after > ttl+d+time.Second {
		t.Errorf("B granted %v after the DEL, want in [%v, %v]", after, d, ttl+d)
	}
	if got := recipe.LockDelayServed(lb); got <= 0 || got > ttl+d {
		t.Errorf("LockDelayServed = %v, want in (0, %v]", got, ttl+d)
	}
	if cause := context.Cause(la.Context()); !errors.Is(cause, recipe.ErrNodeDeleted) {
		t.Errorf("A's lease cause = %v, want ErrNodeDeleted", cause)
	}
	release(t, lb)
}

// Session.Close without Release is an unclean end: Close deletes the key
// (and hands the lock on at once) but leaves the marker expiring the delay
// from then, which the waiter serves. Both sessions have exactly the
// rights of the documented ACL line: the marker needs no other.
func TestLockDelayCloseIsUnclean(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	u := aclUser(t, srv, "locker", "")
	const d = 300 * time.Millisecond
	sa := connectURL(t, u, srv, redislock.WithTTL(confTTL))
	a := mustNewDelayed(t, sa, "closed", d)
	b := mustNewDelayed(t, connectURL(t, u, srv, redislock.WithTTL(confTTL)), "closed", d)
	acquire(t, a)
	got := make(chan recipe.Lease, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*confTTL)
		defer cancel()
		l, err := b.Acquire(ctx)
		if err != nil {
			t.Errorf("B: %v", err)
		}
		got <- l
	}()
	time.Sleep(100 * time.Millisecond) // B waits
	closed := time.Now()
	if err := sa.Close(); err != nil {
		t.Fatal(err)
	}
	lb := <-got
	if lb == nil {
		return
	}
	if after := time.Since(closed); after < d || after > confTTL {
		t.Errorf("B granted %v after A's session closed, want from %v (the delay) to well before the key's expiry", after, d)
	}
	if got := recipe.LockDelayServed(lb); got <= 0 || got > d {
		t.Errorf("LockDelayServed = %v, want in (0, %v]", got, d)
	}
	release(t, lb)
}

// A holder's renewal writes the marker again: one deleted by someone else
// while the lock is held comes back, so a later crash is still delayed.
func TestLockDelayRenewalRestoresMarker(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	a := mustNewDelayed(t, connect(t, srv, nil), "restore", time.Second)
	la := acquire(t, a)
	if err := rdb.Del(context.Background(), a.DelayKey()).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * confTTL)
	for {
		if v, _ := markerOf(t, rdb, a); v == "held:"+redislock.Owner(la) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the marker did not come back within %v of renewals", 2*confTTL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	release(t, la)
}

// A marker nobody could have written with the option (no expiry: a
// hostile or careless client) blocks the lock for at most the TTL + the
// delay: the contender cuts it to that.
func TestLockDelayForeignMarkerIsBounded(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	const d, ttl = 300 * time.Millisecond, redislock.MinTTL
	a := mustNewDelayed(t, connect(t, srv, nil, redislock.WithTTL(ttl)), "foreign", d)
	if err := rdb.Set(ctx, a.DelayKey(), "held:nobody", 0).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if l, err := a.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		releaseQuietly(l)
		t.Fatalf("TryAcquire under a foreign marker = %v, want ErrLocked", err)
	}
	if _, pttl := markerOf(t, rdb, a); pttl <= 0 || pttl > ttl+d {
		t.Errorf("the foreign marker's PTTL after a contender saw it = %v, want in (0, %v]", pttl, ttl+d)
	}
	actx, cancel := context.WithTimeout(ctx, 3*(ttl+d))
	defer cancel()
	l, err := a.Acquire(actx)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > ttl+d+time.Second {
		t.Errorf("granted %v after a foreign marker was set, want within about %v", took, ttl+d)
	}
	release(t, l)
}

// The marker race: the clean record (the marker's DEL) and the key's DEL
// are one script, so a Release that reached the server counts as clean
// even when its answer is lost and the holder dies right after: the next
// grant serves nothing. (One that never reached it is a crash: the
// conformance suite's CrashServesDelay.) The server is paused while the
// request is in its socket, the holder's connections are closed, and the
// server then runs the request and finds the client gone.
func TestLockDelayLostReleaseAnswerIsClean(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	const d = time.Minute
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	a := mustNewDelayed(t, connect(t, srv, p), "lost-answer", d)
	b := mustNewDelayed(t, connect(t, srv, nil), "lost-answer", d)
	release(t, acquire(t, a)) // the server knows both scripts: EVALSHA runs them
	la := acquire(t, a)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := la.Release(rctx) // one attempt, bounded by a third of the TTL
	cancel()
	if err == nil {
		t.Fatalf("Release answered while the server was paused")
	}
	p.Close() // the holder dies: nothing it sent is answered
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(confTTL / 2) // well before the key's expiry
	for {
		l, err := b.TryAcquire(ctx)
		if err == nil {
			if got := recipe.LockDelayServed(l); got != 0 {
				t.Errorf("LockDelayServed after a Release whose answer was lost = %v, want 0", got)
			}
			release(t, l)
			return
		}
		if !errors.Is(err, recipe.ErrLocked) || time.Now().After(deadline) {
			t.Fatalf("TryAcquire after a Release that reached the server: %v (the server has not run it?)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// releaseQuietly releases l if it is a lease.
func releaseQuietly(l recipe.Lease) {
	if l != nil {
		_ = l.Release(context.Background())
	}
}

// The marker is written in the grant's script, so the append-only file
// (fsynced before every reply) has both or neither: after a SIGKILL of the
// server and a restart, the holder's marker is back with its absolute
// expiry, still naming it, and a crash of the holder after that is still
// delayed.
func TestLockDelayMarkerSurvivesServerCrash(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	const d = 300 * time.Millisecond
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	a := mustNewDelayed(t, connect(t, srv, p), "restart", d)
	b := mustNewDelayed(t, connect(t, srv, nil), "restart", d)
	la := acquire(t, a)
	if err := srv.Restart(context.Background()); err != nil { // SIGKILL, then start on the same port and directory
		t.Fatal(err)
	}
	if v, pttl := markerOf(t, rdb, a); v != "held:"+redislock.Owner(la) || pttl <= 0 {
		t.Fatalf("marker after the server's restart = %q (PTTL %v), want held:<A's owner>", v, pttl)
	}
	p.Close() // A crashes
	crashed := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*(confTTL+d))
	defer cancel()
	lb, err := b.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after := time.Since(crashed); after < d {
		t.Errorf("B granted %v after A crashed, sooner than the delay %v", after, d)
	}
	if got := recipe.LockDelayServed(lb); got <= 0 || got > d {
		t.Errorf("LockDelayServed = %v, want in (0, %v]", got, d)
	}
	release(t, lb)
}
