package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// A renewal delayed by the network (a partition that heals: TCP delivers
// what it had buffered) reaches the server after its lease gave up. It must
// not keep the lock held by nobody: the lease that gave up deletes its own
// key (owner-checked) as soon as the server answers again, and a renewal
// that comes after that finds nothing to extend.
//
// With TTL T = 4 s and 1 s of added latency each way, the renewal sent T/3
// after the last success reaches the server T/3 + 1 s after it (the key is
// still A's: it would extend it by a full T) and its answer comes after A's
// deadline (2/3 T after that success), so A gives up; the network then heals.
// Without the delete the key lives until about 3.7 s after A gave up; the
// key's own expiry, without the late renewal, is 1.3 s after.
func TestLateRenewalAfterHealLeavesNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const ttl = 4 * time.Second
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	a := mustNew(t, connect(t, srv, p, redislock.WithTTL(ttl)), "late-renewal")
	b := mustNew(t, connect(t, srv, nil, redislock.WithTTL(ttl)), "late-renewal")
	la := acquire(t, a)
	first := redislock.Deadline(la)
	for redislock.Deadline(la).Equal(first) { // one renewal: the server knows the script (EVALSHA works)
		time.Sleep(10 * time.Millisecond)
	}

	p.SetLatency(time.Second) // from now on A's requests land 1 s late, its answers 1 s later still
	waitDone(t, la.Context(), 2*ttl, "A's lease with 2 s round trips")
	p.SetLatency(0) // healed: what A sends from now on is on time
	gaveUp := time.Now()
	if cause := context.Cause(la.Context()); !errors.Is(cause, recipe.ErrSuspended) {
		t.Fatalf("A's lease cause = %v, want ErrSuspended", cause)
	}

	ctx := context.Background()
	for {
		lb, err := b.TryAcquire(ctx)
		if err == nil {
			blocked := time.Since(gaveUp)
			t.Logf("B was granted %v after A gave up and the network healed (TTL %v)", blocked.Round(time.Millisecond), ttl)
			if blocked > redislock.LossAfter(ttl) {
				t.Errorf("the lock stayed held by nobody for %v after A gave up; want less than %v (a late renewal kept A's key alive)",
					blocked.Round(time.Millisecond), redislock.LossAfter(ttl))
			}
			release(t, lb)
			return
		}
		if !errors.Is(err, recipe.ErrLocked) {
			t.Fatalf("B: %v", err)
		}
		if time.Since(gaveUp) > 3*ttl {
			t.Fatalf("B not granted %v after A gave up", time.Since(gaveUp))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A renewal the server runs more than 2/3 of the TTL after the previous
// grant or renewal of the key ran comes after its lease's deadline (which
// counts from the earlier send): its answer can save nothing, so the server
// refuses it and the key keeps its expiry. One that runs in time extends it.
func TestLateRenewalIsRefused(t *testing.T) {
	srv := redistest.Start(t)
	m := mustNew(t, connect(t, srv, nil), "refused-renewal")
	ctx := context.Background()
	rdb := srv.Client(t)
	owner := redislock.NewOwner()
	if err := rdb.Set(ctx, m.Key(), owner, confTTL).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := redislock.RenewAs(ctx, m, owner); err != nil || n != 1 {
		t.Fatalf("a renewal in time = %d, %v; want 1 (extended)", n, err)
	}
	if n, err := redislock.RenewAs(ctx, m, redislock.NewOwner()); err != nil || n != 0 {
		t.Errorf("another owner's renewal = %d, %v; want 0 (not ours)", n, err)
	}
	for { // until less than T/3 is left: more than 2/3 T since the renewal ran
		left, err := rdb.PTTL(ctx, m.Key()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if left < confTTL-redislock.LossAfter(confTTL)-50*time.Millisecond {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	n, err := redislock.RenewAs(ctx, m, owner)
	if err != nil || n != -1 {
		t.Errorf("a renewal run after the lease's deadline = %d, %v; want -1 (too late)", n, err)
	}
	if left, err := rdb.PTTL(ctx, m.Key()).Result(); err != nil || left > confTTL-redislock.LossAfter(confTTL) {
		t.Errorf("the key's PTTL after the late renewal = %v, %v; want it not extended", left, err)
	}
}
