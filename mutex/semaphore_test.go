package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

const semDir = "/locks/sem"

func newSem(t testing.TB, s *zookeeper.Session, n int) *mutex.Semaphore {
	t.Helper()
	sem, err := mutex.NewSemaphore(s, semDir, n)
	if err != nil {
		t.Fatalf("NewSemaphore: %v", err)
	}
	return sem
}

// TestSemaphoreBoundUnderContention: 8 sessions on a 3-lease semaphore;
// never more than 3 holders, sampled continuously; all 3 leases in use at
// some point; every holder has its own token; nothing left.
func TestSemaphoreBoundUnderContention(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	const leases = 3
	occ := sample(t, func(r, _ int32) string {
		if r > leases {
			return fmt.Sprintf("%d holders of %d leases", r, leases)
		}
		return ""
	})
	var peak atomic.Int32
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[int64]bool{}
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		sem := newSem(t, rtest.Connect(t, cl), leases)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 12; j++ {
				l, err := sem.Acquire(context.Background())
				if err != nil {
					errs <- err
					return
				}
				occ.enter(&occ.readers)
				if n := occ.readers.Load(); n > peak.Load() {
					peak.Store(n)
				}
				mu.Lock()
				if seen[int64(l.Token())] {
					errs <- fmt.Errorf("token %v granted twice", l.Token())
				}
				seen[int64(l.Token())] = true
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
				occ.leave(&occ.readers)
				if err := l.Release(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	occ.assert(t)
	if peak.Load() < 2 {
		t.Fatalf("peak of %d concurrent holders: the semaphore did not share", peak.Load())
	}
	if n := in.Children(semDir); len(n) != 0 {
		t.Fatalf("left behind: %v", n)
	}
}

// TestC14_ConcurrentTryAcquire: many clients call TryAcquire at the same
// moment; never more holders than leases, and every "not acquired" answer
// leaves nothing behind.
func TestC14_ConcurrentTryAcquire(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	for _, leases := range []int{1, 2} {
		t.Run(fmt.Sprint(leases), func(t *testing.T) {
			const clients = 10
			sems := make([]*mutex.Semaphore, clients)
			for i := range sems {
				sems[i] = newSem(t, rtest.Connect(t, cl), leases)
			}
			for round := 0; round < 8; round++ {
				var holders atomic.Int32
				var over atomic.Int32
				start := make(chan struct{})
				var wg sync.WaitGroup
				leasesHeld := make(chan recipe.Lease, clients)
				errs := make(chan error, clients)
				for _, sem := range sems {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						l, err := sem.TryAcquire(context.Background())
						if errors.Is(err, recipe.ErrLocked) {
							return
						}
						if err != nil {
							errs <- err
							return
						}
						if holders.Add(1) > int32(leases) {
							over.Add(1)
						}
						leasesHeld <- l
					}()
				}
				close(start)
				wg.Wait()
				close(errs)
				close(leasesHeld)
				for err := range errs {
					t.Fatal(err)
				}
				if over.Load() != 0 || holders.Load() > int32(leases) {
					t.Fatalf("round %d: %d holders of %d leases", round, holders.Load(), leases)
				}
				if holders.Load() == 0 {
					t.Fatalf("round %d: nobody acquired a free semaphore", round)
				}
				if n := in.Children(semDir); len(n) != int(holders.Load()) {
					t.Fatalf("round %d: %d nodes for %d holders: %v", round, len(n), holders.Load(), n)
				}
				for l := range leasesHeld {
					release(t, l)
				}
			}
		})
	}
}

// TestSemaphoreHandOffFromAnyHolder: with 2 leases, a release by either
// holder (not only the first in the queue) lets the next waiter in, and a
// waiter two places back gets in after two releases.
func TestSemaphoreHandOffFromAnyHolder(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	ctx := context.Background()
	a, err := newSem(t, rtest.Connect(t, cl), 2).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newSem(t, rtest.Connect(t, cl), 2).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := acquireAsync(ctx, newSem(t, rtest.Connect(t, cl), 2))
	serverkit.Eventually(t, 10*time.Second, "C queued", func() bool { return len(in.Children(semDir)) == 3 })
	d := acquireAsync(ctx, newSem(t, rtest.Connect(t, cl), 2))
	serverkit.Eventually(t, 10*time.Second, "D queued", func() bool { return len(in.Children(semDir)) == 4 })
	release(t, b) // the second holder, not the first
	cr := rtest.Await(t, c, 10*time.Second)
	if cr.Err != nil {
		t.Fatal(cr.Err)
	}
	select {
	case r := <-d:
		t.Fatalf("D acquired with 2 holders: %v", r.Err)
	case <-time.After(200 * time.Millisecond):
	}
	release(t, cr.Lease) // C, now the newest holder: D must notice
	dr := rtest.Await(t, d, 10*time.Second)
	if dr.Err != nil {
		t.Fatal(dr.Err)
	}
	if dr.Lease.Token() <= cr.Lease.Token() || cr.Lease.Token() <= b.Token() {
		t.Fatalf("tokens not in grant order: b %v, c %v, d %v", b.Token(), cr.Lease.Token(), dr.Lease.Token())
	}
	release(t, a)
	release(t, dr.Lease)
	if n := in.Children(semDir); len(n) != 0 {
		t.Fatalf("left behind: %v", n)
	}
}

// TestSemaphoreHolderSessionExpired: a holder cut off past its session
// timeout frees its lease: the waiter gets it after the holder's lease
// ended.
func TestSemaphoreHolderSessionExpired(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	other, err := newSem(t, rtest.Connect(t, cl), 2).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cut := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(time.Second))
	l, err := newSem(t, cut, 2).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	done := rtest.WatchDone(l.Context())
	w := acquireAsync(context.Background(), newSem(t, rtest.Connect(t, cl), 2))
	serverkit.Eventually(t, 10*time.Second, "waiter queued", func() bool { return len(in.Children(semDir)) == 3 })
	p.Blackhole()
	r := rtest.Await(t, w, 20*time.Second)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if at := done.Get(); at.IsZero() || !at.Before(r.At) {
		t.Fatalf("the cut holder's lease ended at %v, the waiter acquired at %v", at, r.At)
	}
	p.Resume()
	release(t, other)
	release(t, r.Lease)
}

// TestSemaphoreNoOverGrantAfterLostCreateReply: the reply of a create is
// lost (connection cut right after it was sent); the node is adopted by
// its GUID, never doubled, and a 1-lease semaphore never has two holders.
func TestSemaphoreNoOverGrantAfterLostCreateReply(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create(semDir, nil) // so that the first create is the node's
	var cuts, creates atomic.Int32
	s := rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if op == zktest.OpCreate || op == zktest.OpCreate2 {
			creates.Add(1)
			if cuts.Add(1) == 1 {
				return zktest.SendAndCut
			}
		}
		return zktest.Pass
	})))
	id := s.ID()
	l, err := newSem(t, s, 1).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cuts.Load() == 0 || s.ID() != id {
		t.Fatal("fault not injected, or the session changed")
	}
	if creates.Load() != 1 {
		t.Fatalf("%d creates: the node whose reply was lost was not adopted", creates.Load())
	}
	if n := in.Children(semDir); len(n) != 1 {
		t.Fatalf("nodes %v, want exactly one", n)
	}
	if _, err := newSem(t, rtest.Connect(t, cl), 1).TryAcquire(context.Background()); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("second holder of a 1-lease semaphore: %v, want ErrLocked", err)
	}
	release(t, l)
}

// TestSemaphoreCancelAndBadInput: a waiter that gives up leaves nothing;
// a lease count below 1 is refused.
func TestSemaphoreCancelAndBadInput(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s := rtest.Connect(t, cl)
	for _, n := range []int{0, -1} {
		if _, err := mutex.NewSemaphore(s, semDir, n); !errors.Is(err, recipe.ErrBadOption) {
			t.Fatalf("NewSemaphore(%d): %v, want ErrBadOption", n, err)
		}
	}
	if _, err := mutex.NewSemaphore(s, "bad", 1); !errors.Is(err, recipe.ErrInvalidPath) {
		t.Fatalf("NewSemaphore(bad path): %v, want ErrInvalidPath", err)
	}
	held, err := newSem(t, rtest.Connect(t, cl), 1).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	sem := newSem(t, s, 1)
	if _, err := sem.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past deadline: %v", err)
	}
	if n := in.Owned(semDir, s.ID()); len(n) != 0 {
		t.Fatalf("left behind: %v", n)
	}
	handOver(t, held, sem)
}

// TestMixedRecipesRefused: a mutex and a semaphore (or a read-write lock)
// on one directory would each ignore the other's nodes and both grant; the
// second recipe's acquisition is refused with recipe.ErrMixedRecipes and
// leaves no node, and the first holder keeps the lock.
func TestMixedRecipesRefused(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	ctx := context.Background()
	held, err := newMutex(t, rtest.Connect(t, cl), "/mixed").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := rtest.Connect(t, cl)
	sem, err := mutex.NewSemaphore(s, "/mixed", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sem.TryAcquire(ctx); !errors.Is(err, recipe.ErrMixedRecipes) {
		t.Fatalf("semaphore TryAcquire beside a mutex: %v, want ErrMixedRecipes", err)
	}
	rw, err := mutex.NewRW(s, "/mixed")
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := rw.WriteLock().Acquire(actx); !errors.Is(err, recipe.ErrMixedRecipes) {
		t.Fatalf("write lock Acquire beside a mutex: %v, want ErrMixedRecipes", err)
	}
	if n := in.Owned("/mixed", s.ID()); len(n) != 0 {
		t.Fatalf("refused acquisitions left %v", n)
	}
	if err := held.Context().Err(); err != nil {
		t.Fatalf("the mutex holder lost its lease: %v", context.Cause(held.Context()))
	}
	// Reading the directory as the wrong recipe is refused too (issue 14):
	// it would list nobody beside the mutex's holder.
	if ps, err := sem.Participants(ctx); !errors.Is(err, recipe.ErrMixedRecipes) {
		t.Fatalf("semaphore Participants beside a mutex: %v, %v; want ErrMixedRecipes", ps, err)
	}
	if ps, err := rw.Participants(ctx); !errors.Is(err, recipe.ErrMixedRecipes) {
		t.Fatalf("read-write lock Participants beside a mutex: %v, %v; want ErrMixedRecipes", ps, err)
	}
	release(t, held)
}
