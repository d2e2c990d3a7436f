package mutex_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// go-zookeeper's own zk.Lock (issue 37, items 2 and 12) names its nodes as
// ours ("_c_<32 hex digits>-lock-<sequence>", through
// CreateProtectedEphemeralSequential), so a service migrating from it may
// run both on one path. What holds is in docs/recipes.md#go-zookeepers-zklock.

// zkLockOn returns a zk.Lock on dir over a raw connection of its own (an
// Inspector's), and that connection's Inspector.
func zkLockOn(t *testing.T, cl *zktest.Cluster) (*zk.Lock, *zktest.Inspector) {
	t.Helper()
	in := zktest.Inspect(t, cl)
	return zk.NewLock(in.Conn(), cl.Chroot()+dir, zk.WorldACL(zk.PermAll)), in
}

// lockAsync runs zl.Lock in a goroutine; its error arrives on the channel.
func lockAsync(zl *zk.Lock) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- zl.Lock() }()
	return ch
}

// TestGoZookeeperLockSharesTheQueue: without a lock-delay, zk.Lock and our
// Mutex on one directory share one queue (the lowest sequence holds, for
// both) and exclude each other, both ways.
func TestGoZookeeperLockSharesTheQueue(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	m := newMutex(t, rtest.Connect(t, cl), dir)
	zl, _ := zkLockOn(t, cl)

	ours := acquire(t, m)
	got := lockAsync(zl)
	select {
	case err := <-got:
		t.Fatalf("zk.Lock returned (%v) while our Mutex held %s", err, dir)
	case <-time.After(500 * time.Millisecond): // queued behind our node
	}
	release(t, ours)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("zk.Lock after our Release: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("zk.Lock not granted 10 s after our Release")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if l, err := m.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		if err == nil {
			release(t, l)
		}
		t.Fatalf("TryAcquire while zk.Lock holds: %v, want recipe.ErrLocked", err)
	}
	pending := acquireAsync(context.Background(), m)
	select {
	case r := <-pending:
		if r.Err == nil {
			release(t, r.Lease)
		}
		t.Fatalf("our Acquire returned (%v) while zk.Lock held %s", r.Err, dir)
	case <-time.After(500 * time.Millisecond): // queued behind zk.Lock's node
	}
	if err := zl.Unlock(); err != nil {
		t.Fatal(err)
	}
	r := rtest.Await(t, pending, 10*time.Second)
	if r.Err != nil {
		t.Fatalf("our Acquire after zk.Unlock: %v", r.Err)
	}
	release(t, r.Lease)
}

// TestGoZookeeperLockAndLockDelay: with mutex.WithLockDelay, the marker
// beside the queue nodes breaks zk.Lock. Its Lock parses a sequence out of
// every child and fails on "_lock-delay" (strconv: parsing "delay") while
// the marker exists, and it leaves its node behind: that node then holds
// the queue, for ours and for every zk.Lock, until its session ends. This
// is why docs/recipes.md forbids the option on a path zk.Lock uses.
func TestGoZookeeperLockAndLockDelay(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	m := delayed(t, rtest.Connect(t, cl), testDelay)
	zl, zin := zkLockOn(t, cl)

	ours := acquire(t, m) // writes the marker
	var err error
	select {
	case err = <-lockAsync(zl):
	case <-time.After(10 * time.Second):
		t.Fatal("zk.Lock neither failed nor returned beside the marker")
	}
	if ne := (*strconv.NumError)(nil); !errors.As(err, &ne) || ne.Num != "delay" {
		t.Fatalf("zk.Lock beside the marker: %v, want its parse error on %q", err, "delay")
	}
	left := zin.Owned(dir, zin.Conn().SessionID())
	if len(left) != 1 {
		t.Fatalf("zk.Lock's failed Lock left %q in %s, want its one node", left, dir)
	}
	release(t, ours)

	// zk.Lock's orphan now holds the queue.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if l, err := m.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		if err == nil {
			release(t, l)
		}
		t.Fatalf("TryAcquire behind zk.Lock's orphan node %s: %v, want recipe.ErrLocked", left[0], err)
	}
	pending := acquireAsync(context.Background(), m)
	zin.Conn().Close() // the orphan's session ends: its node goes
	r := rtest.Await(t, pending, 10*time.Second)
	if r.Err != nil {
		t.Fatalf("our Acquire after zk.Lock's session closed: %v", r.Err)
	}
	if d := recipe.LockDelayServed(r.Lease); d != 0 {
		t.Errorf("LockDelayServed = %v after a clean Release, want 0", d)
	}
	release(t, r.Lease)
}
