package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestCloseStopsWorkers: a session with 50 waiters behind a holder (their
// requests are calls, on no worker), functions that return at Close on its
// worker pool, and one function that is slow to return is closed; when
// Close returns, no worker goroutine is left, running or parked.
func TestCloseStopsWorkers(t *testing.T) {
	// Not parallel: it waits only 200 ms for the last worker goroutine to go.
	cl := zktest.Shared(t)
	hs := connect(t, cl.Servers())
	ws := connect(t, cl.Servers())
	hq := newTestQueue(t, hs, "/closeworkers")
	wq := newTestQueue(t, ws, "/closeworkers")
	in := zktest.Inspect(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	held, err := hq.Acquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	const waiters = 50
	errs := make(chan error, waiters)
	for range waiters {
		go func() {
			_, err := wq.Acquire(ctx, "lock-", nil)
			errs <- err
		}()
	}
	serverkit.Eventually(t, 10*time.Second, "waiters queued", func() bool {
		return len(in.Children("/closeworkers")) == waiters+1
	})
	for range 10 {
		ws.pool.run(func() { <-ws.quit }) // as a request that returns at Close
	}
	serverkit.Eventually(t, 10*time.Second, "workers running before Close", func() bool { return countWorkers(ws) >= 10 })
	// One worker still busy when Close is called (a request that returns
	// late): Close must wait for it too.
	var finished atomic.Bool
	ws.pool.run(func() { time.Sleep(300 * time.Millisecond); finished.Store(true) })
	ws.Close()
	if !finished.Load() {
		t.Fatal("Session.Close returned while a worker was still running its function")
	}
	// A worker that has signalled its end may still be on its way out of
	// the goroutine for an instant.
	serverkit.Eventually(t, 200*time.Millisecond, "no worker goroutine after Session.Close", func() bool { return countWorkers(ws) == 0 })
	for range waiters {
		if err := <-errs; !errors.Is(err, recipe.ErrSessionClosed) {
			t.Fatalf("waiter: %v, want ErrSessionClosed", err)
		}
	}
}

// countWorkers counts the goroutines of s's worker pool (the receiver's
// address is the first argument in a goroutine's stack trace).
func countWorkers(s *Session) int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), fmt.Sprintf("zookeeper.(*workers).work(%p", &s.pool))
}

// TestWaiterHeap: 500 waiters queued on one session hold at most 16 KiB of
// client heap each (the target is 8 KiB; the bound leaves room for the
// race detector and the runtime's noise). A waiter that kept its listing
// alive while waiting held about 40 KiB each here (k names for the k-th).
func TestWaiterHeap(t *testing.T) {
	// Not parallel: it measures the process's heap and the shared server's watches.
	cl := zktest.Shared(t)
	hs := connect(t, cl.Servers())
	ws := connect(t, cl.Servers())
	in := zktest.Inspect(t, cl)
	hq := newTestQueue(t, hs, "/waiterheap")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := hq.Acquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 500
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	done := make(chan error, waiters)
	for range waiters {
		q, err := NewQueue(ws, "/waiterheap", []string{"lock-"}, FirstHolds, GrantsLowest())
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			l, err := q.Acquire(ctx, "lock-", nil)
			if err == nil {
				err = l.Release(ctx)
			}
			done <- err
		}()
	}
	serverkit.Eventually(t, 30*time.Second, "waiters queued", func() bool { return len(in.Children("/waiterheap")) == waiters+1 })
	// Each waiter lists all 501 names before it watches: under -race on a
	// loaded machine that can take more than 10 s (failed so, twice).
	var watching int
	defer func() { t.Logf("%d watches on the server when last counted", watching) }()
	serverkit.Eventually(t, 30*time.Second, "waiters watching", func() bool {
		n, err := zktest.WatchCount(ctx, strings.SplitN(cl.Servers()[0], "/", 2)[0])
		watching = n
		return err == nil && n >= waiters
	})
	runtime.GC()
	runtime.ReadMemStats(&m1)
	per := (int64(m1.HeapAlloc) - int64(m0.HeapAlloc)) / waiters
	t.Logf("%d B of heap per queued waiter", per)
	if per > 16<<10 {
		t.Errorf("%d B of heap per queued waiter, want at most %d", per, 16<<10)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
