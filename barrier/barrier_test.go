package barrier_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/barrier"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func newBarrier(t *testing.T, s *zookeeper.Session, p string) *barrier.Barrier {
	t.Helper()
	b, err := barrier.New(s, p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBarrierRefused: bad paths, a nil session and nil contexts are
// refused before anything is sent.
func TestBarrierRefused(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	s := rtest.Connect(t, cl)
	for _, p := range []string{"", "rel", "/a/", "/zookeeper/x", "/a/_c_0123456789abcdef0123456789abcdef-lock-0000000001"} {
		if _, err := barrier.New(s, p); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("New(%q): %v, want recipe.ErrInvalidPath", p, err)
		}
	}
	if _, err := barrier.New(nil, "/b"); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("New(nil session): %v, want recipe.ErrBadOption", err)
	}
	b := newBarrier(t, s, "/refused/b")
	//lint:ignore SA1012 a nil ctx is the bad input under test
	errs := []error{b.Set(nil), b.Remove(nil), b.Wait(nil)}
	for i, err := range errs {
		if !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("call %d (Set, Remove, Wait) with a nil ctx: %v, want recipe.ErrBadOption", i, err)
		}
	}
	if zktest.Inspect(t, cl).Stat("/refused") != nil {
		t.Error("a refused call made the barrier's parent")
	}
}

// TestBarrierSetWaitRemove: Set and Remove are idempotent; Wait blocks
// while the barrier is set (another Session's Wait too), returns once it
// is removed, and at once when it is not set; nothing is left.
func TestBarrierSetWaitRemove(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	b := newBarrier(t, rtest.Connect(t, cl), "/gate/b")
	w := newBarrier(t, rtest.Connect(t, cl), "/gate/b")
	if err := w.Wait(opCtx(t)); err != nil {
		t.Fatalf("Wait on a barrier not set: %v", err)
	}
	for range 2 {
		if err := b.Set(opCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := w.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a set barrier with a short ctx: %v, want context.DeadlineExceeded", err)
	}
	waiting := async(func() error { return w.Wait(opCtx(t)) })
	time.Sleep(100 * time.Millisecond) // let the waiter watch (either order passes)
	stillBlocked(t, waiting, "Wait")
	for range 2 {
		if err := b.Remove(opCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := await(t, waiting, "Wait"); err != nil {
		t.Fatalf("Wait after Remove: %v", err)
	}
	if in.Stat("/gate/b") != nil {
		t.Error("the barrier's node is left")
	}
}

// TestBarrierLostReplies: a Set and a Remove whose replies are lost (the
// connection cut right after the send) are settled: the node made once,
// then gone, and both calls return nil.
func TestBarrierLostReplies(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	var cut atomic.Int32 // the opcode to cut after, once
	hook := zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if op != 0 && cut.CompareAndSwap(op, 0) {
			return zktest.SendAndCut
		}
		return zktest.Pass
	})
	b := newBarrier(t, rtest.Connect(t, cl, zookeeper.WithDialer(hook)), "/lost")
	cut.Store(zktest.OpCreate)
	if err := b.Set(opCtx(t)); err != nil {
		t.Fatalf("Set with its reply lost: %v", err)
	}
	if cut.Load() != 0 || in.Stat("/lost") == nil {
		t.Fatalf("the create was not cut (%d) or made no node", cut.Load())
	}
	cut.Store(zktest.OpDelete)
	if err := b.Remove(opCtx(t)); err != nil {
		t.Fatalf("Remove with its reply lost: %v", err)
	}
	if cut.Load() != 0 || in.Stat("/lost") != nil {
		t.Fatalf("the delete was not cut (%d) or left the node", cut.Load())
	}
}

// TestBarrierWaitOutlivesSessionLoss: a waiter whose session expires, and
// whose connection is cut, keeps waiting, and returns once the barrier is
// removed; a waiter whose Session is closed gets recipe.ErrSessionClosed.
func TestBarrierWaitOutlivesSessionLoss(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	b := newBarrier(t, rtest.Connect(t, cl), "/outlive")
	if err := b.Set(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	c := connectProxied(t, cl, zookeeper.WithSessionTimeout(rtest.ConfTimeout))
	w := newBarrier(t, c.s, "/outlive")
	waiting := async(func() error { return w.Wait(opCtx(t)) })
	closing := rtest.Connect(t, cl)
	closed := async(func() error { return newBarrier(t, closing, "/outlive").Wait(opCtx(t)) })
	time.Sleep(100 * time.Millisecond)
	old := c.s.ID()
	c.expire(t, cl)
	serverkit.Eventually(t, 20*time.Second, "a new session", func() bool { return c.s.ID() != old && c.s.State() != recipe.StateLost })
	c.p.Cut()
	c.p.Resume()
	stillBlocked(t, waiting, "Wait")
	closing.Close()
	if err := await(t, closed, "Wait on a closed Session"); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("Wait on a closed Session: %v, want recipe.ErrSessionClosed", err)
	}
	if err := b.Remove(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := await(t, waiting, "Wait"); err != nil {
		t.Fatalf("Wait after a session loss and Remove: %v", err)
	}
}

// TestBarrierCancelledWaitsLeaveNoWatch: 20 waits given up on one
// Session cost the server one watch, not 20, and none is left once the
// barrier is removed (on a server of its own: watches are counted
// server-wide).
func TestBarrierCancelledWaitsLeaveNoWatch(t *testing.T) {
	cl := zktest.Start(t)
	t.Parallel() // after Start: servers start one at a time
	ctx := context.Background()
	watches := func() int {
		n, err := zktest.WatchCount(ctx, cl.Addrs()[0])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	s := rtest.Connect(t, cl)
	b := newBarrier(t, s, "/watched")
	if err := b.Set(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		if err := b.Wait(wctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait: %v, want context.DeadlineExceeded", err)
		}
		cancel()
	}
	if n := watches(); n > 1 {
		t.Errorf("%d watches on the server after 20 cancelled waits, want at most 1", n)
	}
	if err := b.Remove(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	serverkit.Eventually(t, 10*time.Second, "no watch left", func() bool { return watches() == 0 })
}
