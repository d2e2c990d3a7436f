package election_test

import (
	"context"
	"testing"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestConformance runs the backend-neutral conformance suite (testkit/locktest)
// against the election seen as a lock: Acquire is Campaign and TryAcquire is
// TryCampaign, each on a fresh Election (one Election campaigns for one
// leadership at a time, while the suite calls Acquire from several
// goroutines of one client), and a lease's Release is Resign. Every client
// has its own session through its own FaultProxy (rtest.LockHarness).
func TestConformance(t *testing.T) {
	cl := zktest.Shared(t)
	locktest.Run(t, &rtest.LockHarness{Cluster: cl, In: zktest.Inspect(t, cl),
		Lock: func(tb testing.TB, s *zookeeper.Session, dir string) recipe.Lock {
			if _, err := election.New(s, dir); err != nil { // the path is valid: fail here, not in Acquire
				tb.Fatal(err)
			}
			return electionLock{s: s, dir: dir}
		}})
}

// TestHolderConformance: the election as a recipe.HolderObserver
// (locktest.RunHolder), observed from a session of its own.
func TestHolderConformance(t *testing.T) {
	cl := zktest.Shared(t)
	h := &rtest.LockHarness{Cluster: cl, In: zktest.Inspect(t, cl),
		Lock: func(tb testing.TB, s *zookeeper.Session, dir string) recipe.Lock { return electionLock{s: s, dir: dir} }}
	locktest.RunHolder(t, h, func(tb testing.TB, lock string) recipe.HolderObserver {
		return newElection(tb, rtest.Connect(tb, cl), rtest.LockPath(lock))
	})
}

// electionLock is the election as a recipe.Lock.
type electionLock struct {
	s   *zookeeper.Session
	dir string
}

func (l electionLock) Acquire(ctx context.Context) (recipe.Lease, error) {
	e, err := election.New(l.s, l.dir, election.WithLogger(quietLogger))
	if err != nil {
		return nil, err
	}
	return e.Campaign(ctx, nil)
}

func (l electionLock) TryAcquire(ctx context.Context) (recipe.Lease, error) {
	e, err := election.New(l.s, l.dir, election.WithLogger(quietLogger))
	if err != nil {
		return nil, err
	}
	return e.TryCampaign(ctx, nil)
}
