package redislock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// waitDone waits up to d for ctx to end.
func waitDone(t *testing.T, ctx context.Context, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(d):
		t.Fatalf("%s: still live after %v", what, d)
	}
}

// An operator's DEL of the lock key ends the holder's lease at its next
// renewal (cause ErrNodeDeleted), and its Release then deletes nothing; the
// waiter, which got no release notification, finds the lock free at its
// fallback re-check.
func TestDeletedKeyEndsLease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a := mustNew(t, connect(t, srv, nil), "deleted")
	b := mustNew(t, connect(t, srv, nil), "deleted")
	la := acquire(t, a)
	got := make(chan recipe.Lease, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		l, err := b.Acquire(ctx)
		if err != nil {
			t.Errorf("B: %v", err)
		}
		got <- l
	}()
	time.Sleep(100 * time.Millisecond) // B is waiting

	ctx := context.Background()
	rdb := srv.Client(t)
	if err := rdb.Del(ctx, a.Key()).Err(); err != nil { // no PUBLISH: B is not told
		t.Fatal(err)
	}
	deleted := time.Now()
	waitDone(t, la.Context(), 2*confTTL, "A's lease after its key was deleted")
	if cause := context.Cause(la.Context()); !errors.Is(cause, recipe.ErrNodeDeleted) {
		t.Errorf("A's lease cause = %v, want ErrNodeDeleted", cause)
	}
	lb := <-got
	if lb == nil {
		return
	}
	t.Logf("B, not notified, was granted %v after the deletion (fallback re-check; TTL %v)", time.Since(deleted).Round(time.Millisecond), confTTL)
	if err := la.Release(ctx); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("A: Release after the deletion = %v, want ErrLeaseLost", err)
	}
	if lb.Context().Err() != nil {
		t.Errorf("B's lease ended after A's stale Release: %v", context.Cause(lb.Context()))
	}
	if lb.Token() <= la.Token() {
		t.Errorf("B's token %v is not larger than A's %v", lb.Token(), la.Token())
	}
	release(t, lb)
}

// A key overwritten by someone else (another program using the same key
// name) is not ours: the holder's lease ends at its next renewal and its
// Release leaves the other value alone.
func TestOverwrittenKeyIsNotDeleted(t *testing.T) {
	srv := redistest.Start(t)
	a := mustNew(t, connect(t, srv, nil), "overwritten")
	la := acquire(t, a)
	ctx := context.Background()
	rdb := srv.Client(t)
	if err := rdb.Set(ctx, a.Key(), "intruder", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, la.Context(), 2*confTTL, "A's lease after its key was overwritten")
	if cause := context.Cause(la.Context()); !errors.Is(cause, recipe.ErrNodeDeleted) {
		t.Errorf("A's lease cause = %v, want ErrNodeDeleted", cause)
	}
	if err := la.Release(ctx); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("A: Release = %v, want ErrLeaseLost", err)
	}
	if v, err := rdb.Get(ctx, a.Key()).Result(); err != nil || v != "intruder" {
		t.Errorf("key after A's Release = %q, %v; want the intruder's value kept", v, err)
	}
	if _, err := a.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		t.Errorf("TryAcquire while the intruder's key exists = %v, want ErrLocked", err)
	}
	rdb.Del(ctx, a.Key())
}

// Release deletes the lock key and nothing else: the token counter has no
// expiry and survives every release, so tokens keep growing.
func TestCounterIsNeverDeletedOrExpired(t *testing.T) {
	srv := redistest.Start(t)
	m := mustNew(t, connect(t, srv, nil), "counter")
	last := grantAndRelease(t, m, 3)
	ctx := context.Background()
	rdb := srv.Client(t)
	if n, err := rdb.Exists(ctx, m.Key()).Result(); err != nil || n != 0 {
		t.Errorf("lock key after release: exists=%d, %v", n, err)
	}
	if v, err := rdb.Get(ctx, m.TokenKey()).Uint64(); err != nil || v != uint64(last) {
		t.Errorf("token counter = %d, %v; want the last token %v", v, err, last)
	}
	if ttl, err := rdb.PTTL(ctx, m.TokenKey()).Result(); err != nil || ttl != -time.Nanosecond {
		t.Errorf("token counter PTTL = %v, %v; want no expiry", ttl, err)
	}
}

// Lock names whose keys could collide with another lock's under a naive
// scheme ("a" and "a:token") are independent locks, and so are locks of the
// same name under different prefixes.
func TestNoKeyCollisions(t *testing.T) {
	srv := redistest.Start(t)
	s := connect(t, srv, nil)
	other := connect(t, srv, nil, redislock.WithKeyPrefix(srv.KeyPrefix()+"other:"))
	names := []string{"a", "a:token", "a:holder", "a:queue", "a:delay", "a:released", "a:token:token"}
	seen := make(map[string]string)
	var held []recipe.Lease
	for _, n := range names {
		for _, sess := range []*redislock.Session{s, other} {
			m := mustNewDelayed(t, sess, n, time.Second)
			for _, k := range []string{m.Key(), m.TokenKey(), m.QueueKey(), m.DelayKey()} {
				if prev, dup := seen[k]; dup {
					t.Errorf("key %q used by %s and %s", k, prev, n)
				}
				seen[k] = n
			}
			l := acquire(t, m) // would wait forever if another lock held its key
			if l.Token() != 1 {
				t.Errorf("lock %q: first token %v, want 1 (a counter shared with another lock?)", n, l.Token())
			}
			held = append(held, l)
		}
	}
	for _, l := range held {
		release(t, l)
	}
}

// A release wakes a waiter through its pub/sub subscription, long before
// the fallback re-check (which, with a 30 s TTL, would come about 30 s
// later); the subscription is gone once the waiter returns.
func TestReleaseNotifiesWaiter(t *testing.T) {
	srv := redistest.Start(t)
	const ttl = 30 * time.Second
	a := mustNew(t, connect(t, srv, nil, redislock.WithTTL(ttl)), "notify")
	b := mustNew(t, connect(t, srv, nil, redislock.WithTTL(ttl)), "notify")
	la := acquire(t, a)
	got := make(chan recipe.Lease, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
		defer cancel()
		l, err := b.Acquire(ctx)
		if err != nil {
			t.Errorf("B: %v", err)
		}
		got <- l
	}()
	rdb := srv.Client(t)
	waitQueued(t, rdb, b, 1) // B is subscribed and queued
	released := time.Now()
	release(t, la)
	select {
	case lb := <-got:
		t.Logf("B was granted %v after A's release", time.Since(released).Round(time.Millisecond))
		if lb != nil {
			release(t, lb)
		}
	case <-time.After(ttl / 3):
		t.Fatalf("B was not granted within %v of A's release: no notification", ttl/3)
	}
	noWaiters(t, rdb, b)
}

// A waiter whose subscription connection dies subscribes again (the server
// killed it here), and the next release still wakes it through the new
// subscription, not at its fallback re-check 30 s later.
func TestWaiterResubscribes(t *testing.T) {
	srv := redistest.Start(t)
	const ttl = 30 * time.Second
	a := mustNew(t, connect(t, srv, nil, redislock.WithTTL(ttl)), "resubscribe")
	b := mustNew(t, connect(t, srv, nil, redislock.WithTTL(ttl)), "resubscribe")
	la := acquire(t, a)
	got := make(chan recipe.Lease, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
		defer cancel()
		l, err := b.Acquire(ctx)
		if err != nil {
			t.Errorf("B: %v", err)
		}
		got <- l
	}()
	ctx := context.Background()
	rdb := srv.Client(t)
	pattern := b.QueueKey()[:len(b.QueueKey())-len("queue")] + "wake:*"
	subscribed := func() {
		t.Helper()
		for i := 0; ; i++ {
			chs, err := rdb.PubSubChannels(ctx, pattern).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(chs) == 1 {
				return
			}
			if i > 500 {
				t.Fatalf("B is not subscribed to a channel %s", pattern)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	subscribed()
	if err := rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	subscribed()                       // again, on a new connection
	time.Sleep(100 * time.Millisecond) // B has read the confirmation, tried, and waits
	release(t, la)
	select {
	case lb := <-got:
		if lb != nil {
			release(t, lb)
		}
	case <-time.After(ttl / 3):
		t.Fatalf("B was not granted within %v of A's release", ttl/3)
	}
}

// A waiter's Acquire ends when its context is cancelled, not at its next
// re-check (30 s away here), and leaves no subscription or queue entry
// behind.
func TestWaiterHonoursCancellation(t *testing.T) {
	srv := redistest.Start(t)
	const ttl = 30 * time.Second
	a := mustNew(t, connect(t, srv, nil, redislock.WithTTL(ttl)), "cancel-wait")
	b := mustNew(t, connect(t, srv, nil, redislock.WithTTL(ttl)), "cancel-wait")
	la := acquire(t, a)
	defer release(t, la)
	giveUp := errors.New("the caller gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(300*time.Millisecond, func() { cancel(giveUp) })
	start := time.Now()
	_, err := b.Acquire(ctx)
	if !errors.Is(err, giveUp) {
		t.Errorf("B: Acquire = %v, want the cancellation cause", err)
	}
	if d := time.Since(start); d > ttl/3 {
		t.Errorf("B's Acquire returned %v after its context was cancelled", d)
	}
	noWaiters(t, srv.Client(t), b)
}

// An acquire request whose answer is lost leaves nothing behind: with 300 ms
// of latency each way, an Acquire whose deadline passes before the answer
// (the request still lands) and one cancelled while the request is in flight
// (the grant arrives after the caller gave up) both return the context's
// error, and the key is deleted after them.
func TestLostAnswerLeavesNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	m := mustNew(t, connect(t, srv, p), "lost-answer")
	ctx := context.Background()
	rdb := srv.Client(t)
	grantAndRelease(t, m, 1) // a pooled connection to reuse
	p.SetLatency(300 * time.Millisecond)

	dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := m.Acquire(dctx)
	dcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire past its deadline = %v, want DeadlineExceeded", err)
	}
	giveUp := errors.New("gave up")
	cctx, ccancel := context.WithCancelCause(ctx)
	time.AfterFunc(100*time.Millisecond, func() { ccancel(giveUp) })
	if _, err := m.Acquire(cctx); !errors.Is(err, giveUp) {
		t.Errorf("Acquire cancelled in flight = %v, want its cause", err)
	}
	p.SetLatency(0)
	deadline := time.Now().Add(2 * confTTL)
	for {
		n, err := rdb.Exists(ctx, m.Key()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock key is still there %v after the abandoned attempts", 2*confTTL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	tok, _ := rdb.Get(ctx, m.TokenKey()).Int()
	t.Logf("token counter %d after 1 grant and 2 abandoned attempts (the in-flight ones were granted, then deleted)", tok)
}

// The cleanup of a failed Acquire is done when Acquire returns: with 100 ms
// of latency each way, an Acquire whose deadline passes while its request is
// in flight (the request lands and takes the free lock; the answer is lost)
// deletes the key before it returns, so another client is granted the lock
// right after. (Before, the delete ran in the background and landed after
// Acquire returned: a new connection's handshake and the delete, two round
// trips here; the other client was refused.) The request's timeout at the caller's deadline is not
// logged as a connection error ("acquire failed; retrying" was, at WARN
// level, when the timeout came before the context was marked done).
func TestFailedAcquireCleansUpBeforeReturning(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	var logs syncBuffer
	m := mustNew(t, connect(t, srv, p, redislock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))), "cleanup-sync")
	other := mustNew(t, connect(t, srv, nil), "cleanup-sync")
	ctx := context.Background()
	grantAndRelease(t, m, 1) // the scripts are known and a connection is pooled
	p.SetLatency(100 * time.Millisecond)
	for i := 0; i < 3; i++ {
		dctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		_, err := m.Acquire(dctx)
		cancel()
		returned := time.Now()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire past its deadline = %v, want DeadlineExceeded", err)
		}
		l, err := other.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("attempt %d: TryAcquire right after the failed Acquire returned: %v (its key was still there)", i, err)
		}
		t.Logf("attempt %d: another client was granted %v after the failed Acquire returned", i, time.Since(returned).Round(time.Millisecond))
		release(t, l)
	}
	if strings.Contains(logs.String(), "acquire failed") {
		t.Errorf("the caller's deadline was logged as a failed request:\n%s", logs.String())
	}
}

// A request repeated with the same owner (what Acquire does after a lost
// answer) returns the same grant and token instead of waiting for itself.
func TestRepeatedRequestIsIdempotent(t *testing.T) {
	srv := redistest.Start(t)
	m := mustNew(t, connect(t, srv, nil), "idempotent")
	ctx := context.Background()
	owner := redislock.NewOwner()
	l1, _, err := redislock.TryAs(ctx, m, owner)
	if err != nil || l1 == nil {
		t.Fatalf("first request: %v, %v", l1, err)
	}
	l2, _, err := redislock.TryAs(ctx, m, owner)
	if err != nil || l2 == nil {
		t.Fatalf("repeated request: %v, %v", l2, err)
	}
	if l1.Token() != l2.Token() {
		t.Errorf("repeated request got token %v, the first %v", l2.Token(), l1.Token())
	}
	if _, pttl, err := redislock.TryAs(ctx, m, redislock.NewOwner()); err != nil || pttl <= 0 {
		t.Errorf("another owner: pttl %v, %v; want the lock held", pttl, err)
	}
	release(t, l1)
	// l2 is the same grant: nothing is left to delete (nil), unless its
	// renewal already found the key gone (ErrLeaseLost).
	if err := l2.Release(ctx); err != nil && !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Release of the repeated grant: %v", err)
	}
}
