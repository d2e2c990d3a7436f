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

// The two numbers of the recipe, as fractions of the TTL: the holder's lease
// context ends 2/3 of the TTL after the send of its last successful SET or
// renewal; the server lets another contender in no sooner than the TTL after
// it ran that request, which is later than the send. Renewals go out every
// third of the TTL, so one renewal may fail or be late without a loss.
func TestFractions(t *testing.T) {
	for _, ttl := range []time.Duration{redislock.MinTTL, confTTL, redislock.DefaultTTL, time.Hour} {
		loss, renew := redislock.LossAfter(ttl), redislock.RenewEvery(ttl)
		if !(renew < loss && loss < ttl) {
			t.Errorf("TTL %v: renew every %v, loss after %v: want renew < loss < TTL", ttl, renew, loss)
		}
		if ttl-loss < ttl/3-time.Millisecond {
			t.Errorf("TTL %v: margin %v between the client's deadline and the server's expiry, want a third of the TTL", ttl, ttl-loss)
		}
	}
}

// A waiter that gets no notification sleeps until the holder's key is due to
// expire plus at most a tenth more, and never much longer than the TTL
// (a key without expiry, PTTL -1), so a lost message costs at most about a
// TTL; a key already gone (PTTL -2) is checked again at once.
func TestRecheckIsBounded(t *testing.T) {
	m := mustNew(t, connect(t, redistest.Start(t), nil), "recheck")
	for _, c := range []struct{ pttl, base time.Duration }{
		{-2 * time.Millisecond, 0},
		{-1 * time.Millisecond, confTTL},
		{0, 0},
		{confTTL / 2, confTTL / 2},
		{confTTL, confTTL},
		{10 * confTTL, confTTL},
	} {
		for i := 0; i < 100; i++ {
			d := redislock.RecheckAfter(m, c.pttl)
			if d <= c.base || d > c.base+c.base/10+2*time.Millisecond {
				t.Fatalf("PTTL %v: re-check after %v, want in (%v, %v]", c.pttl, d, c.base, c.base+c.base/10+2*time.Millisecond)
			}
		}
	}
}

// TestLossBeforeServerExpiry shows the numbers on a real server: while the
// lock is held, every renewal leaves the lease's deadline before the key's
// expiry on the server (PEXPIRETIME); when the holder is cut off, its lease
// context ends before the server lets another contender in.
func TestLossBeforeServerExpiry(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	a := mustNew(t, connect(t, srv, p), "numbers")
	b := mustNew(t, connect(t, srv, nil), "numbers")
	ctx := context.Background()
	rdb := srv.Client(t)
	la := acquire(t, a)

	// Over four renewals: deadline < expiry.
	minMargin := time.Hour
	for i := 0; i < 8; i++ {
		dl := redislock.Deadline(la)
		ms, err := rdb.PExpireTime(ctx, a.Key()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if dl2 := redislock.Deadline(la); !dl2.Equal(dl) {
			i-- // a renewal landed between the two reads: read again
			continue
		}
		expiry := time.UnixMilli(int64(ms / time.Millisecond))
		if !dl.Before(expiry) {
			t.Errorf("the lease's deadline %v is not before the key's expiry %v", dl.Format(time.StampMilli), expiry.Format(time.StampMilli))
		}
		minMargin = min(minMargin, expiry.Sub(dl))
		time.Sleep(redislock.RenewEvery(confTTL) / 2)
	}
	t.Logf("while held: the key outlived the lease's deadline by at least %v (TTL/3 = %v)", minMargin.Round(time.Millisecond), confTTL/3)
	if err := la.Context().Err(); err != nil {
		t.Fatalf("the lease ended while renewals worked: %v", context.Cause(la.Context()))
	}

	// Cut A off; B asks every 5 ms.
	lastSend := redislock.Deadline(la).Add(-redislock.LossAfter(confTTL))
	cut := time.Now()
	p.Blackhole()
	aEnded := make(chan time.Time, 1)
	context.AfterFunc(la.Context(), func() { aEnded <- time.Now() })
	var lb recipe.Lease
	for {
		l, err := b.TryAcquire(ctx)
		if err == nil {
			lb = l
			break
		}
		if !errors.Is(err, recipe.ErrLocked) {
			t.Fatalf("B: %v", err)
		}
		if time.Since(cut) > 2*confTTL+5*time.Second {
			t.Fatalf("B not granted %v after A was cut off", time.Since(cut))
		}
		time.Sleep(5 * time.Millisecond)
	}
	granted := time.Now()
	if la.Context().Err() == nil {
		t.Fatalf("B was granted %v after the cut while A's lease context is live: two holders", granted.Sub(cut))
	}
	ended := <-aEnded // taken by a goroutine woken by the end: a little late, never early
	if cause := context.Cause(la.Context()); !errors.Is(cause, recipe.ErrSuspended) {
		t.Errorf("A's lease cause = %v, want ErrSuspended", cause)
	}
	t.Logf("cut-off holder: lease context ended %v after the cut (%v after its last renewal was sent; bound 2/3 TTL = %v)",
		ended.Sub(cut).Round(time.Millisecond), ended.Sub(lastSend).Round(time.Millisecond), redislock.LossAfter(confTTL))
	t.Logf("server: granted B %v after the cut (%v after A's last renewal was sent; bound TTL = %v from when the server ran it)",
		granted.Sub(cut).Round(time.Millisecond), granted.Sub(lastSend).Round(time.Millisecond), confTTL)
	t.Logf("gap between the two: %v", granted.Sub(ended).Round(time.Millisecond))
	p.Resume()
	if err := la.Release(ctx); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("A: Release after the loss = %v, want ErrLeaseLost", err)
	}
	release(t, lb)
}
