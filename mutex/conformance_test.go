package mutex_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestConformance runs the backend-neutral conformance suite (testkit/locktest)
// against the exclusive locks of this package: the mutex, the write side of
// the read-write lock, and a semaphore with one lease. Every client has its
// own session through its own FaultProxy (rtest.LockHarness). The three run in parallel, each on
// its own chroot.
func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name string
		lock func(testing.TB, *zookeeper.Session, string) recipe.Lock
	}{
		{"Mutex", func(tb testing.TB, s *zookeeper.Session, p string) recipe.Lock { return newMutex(tb, s, p) }},
		{"RWWriteSide", func(tb testing.TB, s *zookeeper.Session, p string) recipe.Lock {
			rw, err := mutex.NewRW(s, p)
			if err != nil {
				tb.Fatal(err)
			}
			return rw.WriteLock()
		}},
		{"SemaphoreOfOne", func(tb testing.TB, s *zookeeper.Session, p string) recipe.Lock {
			sem, err := mutex.NewSemaphore(s, p, 1)
			if err != nil {
				tb.Fatal(err)
			}
			return sem
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cl := zktest.Shared(t)
			locktest.Run(t, &rtest.LockHarness{Cluster: cl, In: zktest.Inspect(t, cl), Lock: c.lock})
		})
	}
}

// delayHarness is the conformance harness of a Mutex with a lock-delay
// (locktest.DelayHarness).
type delayHarness struct{ *rtest.LockHarness }

// NewDelayedClient implements locktest.DelayHarness.
func (h delayHarness) NewDelayedClient(tb testing.TB, lock string, d time.Duration) locktest.Client {
	dh := *h.LockHarness
	dh.Lock = func(tb testing.TB, s *zookeeper.Session, p string) recipe.Lock {
		m, err := mutex.New(s, p, mutex.WithLockDelay(d))
		if err != nil {
			tb.Fatal(err)
		}
		return m
	}
	return dh.NewClient(tb, lock)
}

// Leftovers counts the lock's queue nodes; the lock-delay marker counts
// only when it is alone (left behind): beside a node it is part of that
// holder's entry.
func (h delayHarness) Leftovers(_ context.Context, lock string) (int, error) {
	c, _, err := h.In.Conn().Children(h.Cluster.Chroot() + rtest.LockPath(lock))
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil
	}
	n := len(slices.DeleteFunc(c, func(name string) bool { return name == markerName }))
	if n == 0 && len(c) > 0 {
		n = len(c)
	}
	return n, err
}

// TestConformanceLockDelay runs the shared lock-delay properties
// (locktest.RunLockDelay) against the Mutex, with a delay just above
// LeaseTime.Max - Min (7 s - 2/3 s), as RunLockDelay needs.
func TestConformanceLockDelay(t *testing.T) {
	cl := zktest.Shared(t)
	h := delayHarness{&rtest.LockHarness{Cluster: cl, In: zktest.Inspect(t, cl), Lock: func(tb testing.TB, s *zookeeper.Session, p string) recipe.Lock { return newMutex(tb, s, p) }}}
	lt := h.LeaseTime()
	locktest.RunLockDelay(t, h, lt.Max-lt.Min+250*time.Millisecond)
}

// TestHolderConformance: the mutex as a recipe.HolderObserver
// (locktest.RunHolder), observed from a session of its own.
func TestHolderConformance(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	h := &rtest.LockHarness{Cluster: cl, In: zktest.Inspect(t, cl), Lock: func(tb testing.TB, s *zookeeper.Session, p string) recipe.Lock { return newMutex(tb, s, p) }}
	locktest.RunHolder(t, h, func(tb testing.TB, lock string) recipe.HolderObserver {
		return newMutex(tb, rtest.Connect(tb, cl), rtest.LockPath(lock))
	})
}
