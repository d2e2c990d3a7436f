package mutex_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// BenchmarkAcquireRelease is the uncontended acquire path against a real
// server: one session, Acquire then Release.
func BenchmarkAcquireRelease(b *testing.B) {
	benchAcquireRelease(b, newMutex(b, rtest.Connect(b, zktest.Shared(b)), dir))
}

// BenchmarkAcquireReleaseLockDelay is BenchmarkAcquireRelease with a
// lock-delay (never served: every Release is clean): the marker's read and
// create per grant, and the Release's two-op multi.
func BenchmarkAcquireReleaseLockDelay(b *testing.B) {
	benchAcquireRelease(b, delayed(b, rtest.Connect(b, zktest.Shared(b)), time.Second))
}

func benchAcquireRelease(b *testing.B, m recipe.Lock) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for b.Loop() {
		l, err := m.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireReleaseContended is the contended acquire path: 8 or 32
// sessions take turns; b.N acquisitions in all.
func BenchmarkAcquireReleaseContended(b *testing.B) {
	for _, n := range []int{8, 32} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) { benchContended(b, n) })
	}
}

func benchContended(b *testing.B, sessions int) {
	cl := zktest.Shared(b)
	ms := make([]recipe.Lock, sessions)
	for i := range ms {
		ms[i] = newMutex(b, rtest.Connect(b, cl), dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		left     = b.N
		firstErr error
	)
	b.ResetTimer()
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if left == 0 || firstErr != nil {
					mu.Unlock()
					return
				}
				left--
				mu.Unlock()
				l, err := m.Acquire(ctx)
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					mu.Lock()
					firstErr = fmt.Errorf("acquire/release: %w", err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}
