package mutex_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/rtest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/recipe/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestConformance runs the backend-neutral conformance suite (recipe/locktest)
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
