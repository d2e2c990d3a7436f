// Package rtest holds the test helpers every recipe package's tests share:
// a Session per test, and the moment a lease's context ended. (zktest holds
// the server-side helpers; it cannot import recipe.)
package rtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Connect opens a Session to cl for the test (within 20 s, or the test
// fails) and closes it at the test's cleanup.
func Connect(t testing.TB, cl *zktest.Cluster, opts ...recipe.Option) *recipe.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := recipe.Connect(ctx, cl.Servers(), opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// DoneAt records when a context ended.
type DoneAt struct {
	mu sync.Mutex
	at time.Time
}

// WatchDone starts recording when ctx ends.
func WatchDone(ctx context.Context) *DoneAt {
	d := &DoneAt{}
	context.AfterFunc(ctx, func() {
		d.mu.Lock()
		d.at = time.Now()
		d.mu.Unlock()
	})
	return d
}

// Get returns when the context ended (zero if it has not).
func (d *DoneAt) Get() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at
}
