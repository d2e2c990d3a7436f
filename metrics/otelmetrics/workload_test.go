package otelmetrics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/metrics/otelmetrics"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// hook is every interface an adapter implements.
type hook interface {
	recipe.Metrics
	leader.LeadingMetrics
	zookeeper.SequenceMetrics
	recipe.DelayMetrics
}

var _ hook = (*otelmetrics.Metrics)(nil)

// workload reports real events to m: on memlock a grant, a TryAcquire that
// finds the lock held, a queued waiter, a stale write rejected by a Guard,
// one term of leader.Run, and a grant that served a lock-delay; on a real ZooKeeper a session, a grant in a
// fresh directory and the session's Close.
func workload(t *testing.T, m hook) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	srv, err := memlock.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	s := srv.Connect(memlock.WithMetrics(m))
	defer s.Close()
	lock, err := memlock.New(s, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	a, err := lock.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire while held: %v", err)
	}
	ch := rtest.Async(ctx, lock.Acquire)
	serverkit.Eventually(t, 10*time.Second, "a waiter queued", func() bool { return srv.Entries("nightly") == 2 })
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := rtest.Await(t, ch, 10*time.Second)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	var guard fence.Guard
	guard.OnStale = m.StaleRejected
	if err := guard.Check("report", r.Lease.Token()); err != nil {
		t.Fatal(err)
	}
	var stale *fence.StaleError
	if err := guard.Check("report", a.Token()); !errors.As(err, &stale) {
		t.Fatalf("the former holder's write: %v, want a StaleError", err)
	}
	if err := r.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}

	lctx, stop := context.WithCancel(ctx)
	err = leader.Run(lctx, lock, func(ctx context.Context, _ fence.Token) error {
		stop() // one term, then the service shuts down
		<-ctx.Done()
		return nil
	}, leader.WithMetrics(m, "scheduler"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("leader.Run = %v, want context.Canceled", err)
	}

	delayed(ctx, t, srv, s, m)

	zs := rtest.Connect(t, zktest.Shared(t), zookeeper.WithMetrics(m))
	mu, err := mutex.New(zs, "/locks/otel")
	if err != nil {
		t.Fatal(err)
	}
	l, err := mu.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	zs.Close()
}

// delayed makes a grant on s serve a lock-delay: the previous holder's
// session closes without a Release.
func delayed(ctx context.Context, t *testing.T, srv *memlock.Server, s *memlock.Session, m hook) {
	t.Helper()
	const d = 100 * time.Millisecond
	gone := srv.Connect(memlock.WithMetrics(m))
	lock, err := memlock.New(gone, "delayed", memlock.WithLockDelay(d))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	gone.Close() // the grant ends without a Release
	if lock, err = memlock.New(s, "delayed", memlock.WithLockDelay(d)); err != nil {
		t.Fatal(err)
	}
	l, err := lock.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if recipe.LockDelayServed(l) == 0 {
		t.Fatalf("the grant after a holder's session closed served no lock-delay")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
