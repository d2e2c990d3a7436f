package pglock

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// BenchmarkThousandWaiters is docs/performance.md's 1000-waiter pglock
// figure: 1000 Acquire calls on one lock of one Session (default
// WithMaxConns), all started at once, each holding the lock until it has
// released it; one iteration is the time until the last has released. It
// reports the peak of the session's server connections (sampled in
// pg_stat_activity every 5 ms) and the heap growth while they queue.
//
//	cd backend/pglock && go test -run '^$' -bench ThousandWaiters -benchtime 3x .
func BenchmarkThousandWaiters(b *testing.B) {
	const waiters, app = 1000, "bench-1000"
	h := newHarness(b)
	s := h.boundedSession(b, h.cfg, app, WithTTL(DefaultTTL)) // the default TTL, as a program would run
	m, err := New(s, "thousand")
	if err != nil {
		b.Fatal(err)
	}
	var peak, heap int
	for b.Loop() {
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		stop, most := make(chan struct{}), make(chan int)
		go func() {
			n := 0
			for {
				n = max(n, h.conns(b, app))
				select {
				case <-stop:
					most <- n
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
		first := mustAcquire(b, m) // the others queue behind it
		var wg sync.WaitGroup
		for range waiters - 1 {
			wg.Go(func() {
				l, err := m.Acquire(context.Background())
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Release(context.Background()); err != nil {
					b.Error(err)
				}
			})
		}
		for queuedOn(s, m.key) < waiters-1 {
			time.Sleep(time.Millisecond)
		}
		var queued runtime.MemStats
		runtime.ReadMemStats(&queued)
		heap = max(heap, int(queued.HeapAlloc)-int(before.HeapAlloc))
		mustRelease(b, first)
		wg.Wait()
		close(stop)
		peak = max(peak, <-most)
	}
	b.ReportMetric(float64(peak), "peak-conns")
	b.ReportMetric(float64(heap)/waiters, "heap-B/waiter")
}

// queuedOn returns the number of Acquire calls of s that hold or wait for
// key's turn.
func queuedOn(s *Session, key int64) int {
	s.limit.mu.Lock()
	defer s.limit.mu.Unlock()
	if t := s.limit.turns[key]; t != nil {
		return t.users
	}
	return 0
}
