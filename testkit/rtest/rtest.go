// Package rtest holds the test helpers every recipe package's tests share:
// a Session per test, and the moment a lease's context ended. (zktest holds
// the server-side helpers; it cannot import recipe.)
package rtest

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Connect opens a Session to cl for the test (within 20 s, or the test
// fails) and closes it at the test's cleanup.
func Connect(t testing.TB, cl *zktest.Cluster, opts ...zookeeper.Option) *zookeeper.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := zookeeper.Connect(ctx, cl.Servers(), opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// DoneAt records when a context ended.
type DoneAt struct {
	recorded chan struct{} // closed once at is set
	at       time.Time
}

// WatchDone starts recording when ctx ends. The moment is taken by a
// function context.AfterFunc runs, so a little after ctx.Done() closes:
// after <-ctx.Done(), use Wait, not Get.
func WatchDone(ctx context.Context) *DoneAt {
	d := &DoneAt{recorded: make(chan struct{})}
	context.AfterFunc(ctx, func() {
		d.at = time.Now()
		close(d.recorded)
	})
	return d
}

// Get returns when the context ended (zero if that is not recorded yet).
func (d *DoneAt) Get() time.Time {
	select {
	case <-d.recorded:
		return d.at
	default:
		return time.Time{}
	}
}

// Wait returns when the context ended, waiting up to 5 s for the record;
// the test fails if none is made by then.
func (d *DoneAt) Wait(t testing.TB) time.Time {
	t.Helper()
	select {
	case <-d.recorded:
		return d.at
	case <-time.After(5 * time.Second):
		t.Fatal("the context did not end")
		return time.Time{}
	}
}

// Result is the outcome of an acquisition started by Async.
type Result struct {
	Lease recipe.Lease
	Err   error
	At    time.Time // when the call returned
}

// Async runs acquire(ctx) (an Acquire, a Campaign, ...) on a goroutine; its
// Result arrives on the channel.
func Async(ctx context.Context, acquire func(context.Context) (recipe.Lease, error)) <-chan Result {
	ch := make(chan Result, 1)
	go func() {
		l, err := acquire(ctx)
		ch <- Result{l, err, time.Now()}
	}()
	return ch
}

// Await receives a Result, failing the test if none arrives within d.
func Await(t testing.TB, ch <-chan Result, d time.Duration) Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("the acquisition did not return within %v", d)
		return Result{}
	}
}

// HoldMutex takes a mutex (package mutex) on dir, on a Session of its own,
// and returns its lease, failing the test if it cannot: another recipe's
// node in a directory, for the tests of what a latch, an election or an
// observer does when it meets one.
func HoldMutex(ctx context.Context, t testing.TB, cl *zktest.Cluster, dir string) recipe.Lease {
	t.Helper()
	m, err := mutex.New(Connect(t, cl), dir)
	if err != nil {
		t.Fatal(err)
	}
	held, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return held
}
