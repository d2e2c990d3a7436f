package locktest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// basics: the contract of one hand-over between two clients.
func (s *suite) basics(t *testing.T) {
	const lock = "basics"
	a, b := s.h.NewClient(t, lock), s.h.NewClient(t, lock)

	la, err := a.TryAcquire(stepCtx(t))
	if err != nil {
		t.Fatalf("A: TryAcquire of a lock nobody holds: %v", err)
	}
	checkFresh(t, la, "A")
	if lb, err := b.TryAcquire(stepCtx(t)); err == nil {
		releaseQuietly(lb)
		t.Fatalf("B: TryAcquire succeeded while A holds the lock (tokens %v and %v)", la.Token(), lb.Token())
	} else if !errors.Is(err, recipe.ErrLocked) {
		t.Errorf("B: TryAcquire while A holds: %v, want an error matching recipe.ErrLocked", err)
	}
	s.expectLeftovers(t, lock, 1, "A's grant only: a refused TryAcquire leaves nothing")

	pb := s.acquireAsync(t, b, nil)
	release(t, la, "A")
	if cause := context.Cause(la.Context()); !errors.Is(cause, recipe.ErrReleased) {
		t.Errorf("A: lease context cause after Release = %v, want recipe.ErrReleased", cause)
	}
	if err := la.Release(stepCtx(t)); err != nil {
		t.Errorf("A: second Release = %v, want nil (Release is idempotent)", err)
	}
	r := await(t, pb, OpTimeout, "B, waiting while A released")
	if r.lease.Token() <= la.Token() {
		t.Errorf("B's token %v is not larger than A's earlier token %v", r.lease.Token(), la.Token())
	}
	// A deferred Release at shutdown: the removal ignores ctx's
	// cancellation, and one that completes is a success.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.lease.Release(done); err != nil {
		t.Errorf("B: Release with a context already done = %v, want nil (the removal ignores the cancellation)", err)
		release(t, r.lease, "B")
	}
	// A nil ctx counts as context.Background (recipe.Lease): released,
	// nothing left, no panic half way.
	lc, err := a.TryAcquire(stepCtx(t))
	if err != nil {
		t.Fatalf("A: TryAcquire after B released: %v", err)
	}
	var nilCtx context.Context
	if err := lc.Release(nilCtx); err != nil {
		t.Errorf("A: Release(nil) = %v, want nil", err)
		release(t, lc, "A")
	}
	s.expectLeftovers(t, lock, 0, "every grant was released")
}

// mutualExclusion: workers contend with Acquire (even ones) and TryAcquire
// (odd ones); no two are ever inside the critical section together.
func (s *suite) mutualExclusion(t *testing.T) {
	const (
		lock    = "mutual-exclusion"
		workers = 6
		rounds  = 8
	)
	clients := make([]Client, workers)
	for i := range clients {
		clients[i] = s.h.NewClient(t, lock)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*OpTimeout)
	defer cancel()
	var (
		ex exclusion
		wg sync.WaitGroup
	)
	for w, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ex.work(ctx, t, w, c, rounds)
		}()
	}
	wg.Wait()
	if n := ex.overlaps.Load(); n != 0 {
		t.Errorf("%d grants overlapped with another holder", n)
	}
	if ex.counter != workers*rounds {
		t.Errorf("%d fenced writes accepted, want %d", ex.counter, workers*rounds)
	}
	for i := 1; i < len(ex.tokens); i++ {
		if ex.tokens[i] <= ex.tokens[i-1] {
			t.Errorf("grant %d has token %v, not larger than the previous grant's %v", i, ex.tokens[i], ex.tokens[i-1])
		}
	}
	if t.Failed() {
		return
	}
	s.expectLeftovers(t, lock, 0, "every grant was released")
}

// exclusion is what mutualExclusion's workers share.
type exclusion struct {
	inside   atomic.Int32
	overlaps atomic.Int32
	mu       sync.Mutex
	tokens   []fence.Token // in grant order (appended inside the critical section)
	guard    fence.Guard
	counter  int // protected by the lock itself, checked through guard
}

// work is worker w's rounds: take the lock (Acquire for even w, TryAcquire
// until granted for odd w), run the critical section, release.
func (ex *exclusion) work(ctx context.Context, t *testing.T, w int, c Client, rounds int) {
	for i := 0; i < rounds; i++ {
		var l recipe.Lease
		var err error
		for {
			if w%2 == 0 {
				l, err = c.Acquire(ctx)
			} else {
				l, err = c.TryAcquire(ctx)
			}
			if !errors.Is(err, recipe.ErrLocked) || w%2 == 0 {
				break
			}
			sleepCtx(ctx, time.Millisecond)
		}
		if err != nil {
			t.Errorf("worker %d round %d: %v", w, i, err)
			return
		}
		ex.critical(t, w, l)
		if err := l.Release(ctx); err != nil {
			t.Errorf("worker %d: Release: %v", w, err)
			return
		}
	}
}

// critical is worker w's critical section under lease l: it counts an
// overlap with another holder, and writes through the guard.
func (ex *exclusion) critical(t *testing.T, w int, l recipe.Lease) {
	if ex.inside.Add(1) != 1 {
		ex.overlaps.Add(1)
	}
	if err := l.Context().Err(); err != nil {
		t.Errorf("worker %d: lease context done at the grant: %v", w, context.Cause(l.Context()))
	}
	ex.mu.Lock()
	ex.tokens = append(ex.tokens, l.Token())
	ex.mu.Unlock()
	if err := ex.guard.Do("counter", l.Token(), func() error { ex.counter++; return nil }); err != nil {
		t.Errorf("worker %d: fenced write rejected: %v", w, err)
	}
	time.Sleep(time.Millisecond) // widen the window in which an overlap would show
	ex.inside.Add(-1)
}
