package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
)

// TestCancelledOnSlowLinkLeavesNothing: an Acquire cancelled while its put
// is in flight on a slow but working link (600 ms each way: a round trip
// longer than the 1 s the put's answer used to be waited for, shorter than
// attemptTimeout so that the put is not sent again) returns only once its
// key is gone, and another session's TryAcquire gets the lock. Before, it
// returned after 1 s with the key the put made still there, blocking the
// lock until its background delete.
func TestCancelledOnSlowLinkLeavesNothing(t *testing.T) {
	e := newEnv(t)
	const name = "slow-cancel"
	s, p := e.connect(t, etcdlock.WithTTL(12*time.Second)) // attemptTimeout 2 s
	other, _ := e.connect(t)
	m, o := mutex(t, s, name), mutex(t, other, name)
	l, err := m.Acquire(opCtx(t)) // the etcd lease is granted: Acquire's next request is its put
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	p.SetLatency(600 * time.Millisecond)
	giveUp := errors.New("gave up")
	for _, after := range []time.Duration{50 * time.Millisecond, 400 * time.Millisecond} {
		ctx, cancel := context.WithCancelCause(context.Background())
		tm := time.AfterFunc(after, func() { cancel(giveUp) })
		_, err := m.Acquire(ctx)
		tm.Stop()
		cancel(nil)
		if !errors.Is(err, giveUp) {
			t.Fatalf("Acquire cancelled after %v: %v, want the context's cause", after, err)
		}
		if n, err := e.keys(opCtx(t), name); err != nil || n != 0 {
			t.Fatalf("Acquire cancelled after %v returned with %d key(s) left (err %v)", after, n, err)
		}
		lo, err := o.TryAcquire(opCtx(t))
		if err != nil {
			t.Fatalf("Acquire cancelled after %v: another session's TryAcquire: %v", after, err)
		}
		if err := lo.Release(opCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
}
