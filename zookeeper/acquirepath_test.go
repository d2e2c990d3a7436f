package zookeeper

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// opLog records the opcodes a session writes, in wire order.
type opLog struct {
	mu  sync.Mutex
	ops []int32
}

func (o *opLog) dialer() zk.Dialer {
	return zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if op != zktest.OpPing {
			o.mu.Lock()
			o.ops = append(o.ops, op)
			o.mu.Unlock()
		}
		return zktest.Pass
	})
}

func (o *opLog) take() []int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	ops := o.ops
	o.ops = nil
	return ops
}

func newTestQueue(t *testing.T, s *Session, dir string) *Queue {
	t.Helper()
	q, err := NewQueue(s, dir, []string{"lock-"}, FirstHolds, GrantsLowest())
	if err != nil {
		t.Fatal(err)
	}
	if err := q.d.ensureDir(); err != nil {
		t.Fatal(err)
	}
	return q
}

// TestAcquirePipelined: an uncontended Acquire writes the create (as
// create2) and the listing right behind it; the first one reads its node
// with a watch before granting, every later one (the queue was found
// uncontended) grants on the listing, whose child watch stands in for the
// own-node watch, without reading its node: the token is the node's czxid,
// from the create2 reply. Release is one delete.
func TestAcquirePipelined(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	var log opLog
	s := connect(t, cl.Servers(), WithDialer(log.dialer()))
	in := zktest.Inspect(t, cl)
	// A persistent directory: the servers' container reaper (every second
	// in the harness) may delete an empty container between two rounds,
	// and the next create would then re-create it and list twice.
	in.Create("/pipe", nil)
	defer in.Delete("/pipe")
	q := newTestQueue(t, s, "/pipe")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel() // a cancellable ctx: the requests run on the Session's workers
	for i := 0; i < 20; i++ {
		log.take()
		l, err := q.Acquire(ctx, "lock-", nil)
		if err != nil {
			t.Fatal(err)
		}
		ops := log.take()
		if len(ops) < 2 || ops[0] != zktest.OpCreate2 || ops[1] != zktest.OpGetChildren2 {
			t.Fatalf("acquire wrote %v; want create2, then getChildren2 right behind it", ops)
		}
		if slices.Contains(ops, zktest.OpExists) || count(ops, zktest.OpGetChildren2) != 1 {
			t.Fatalf("acquire wrote %v: more than one listing, or an exists", ops)
		}
		if want := map[bool]int{true: 1, false: 0}[i == 0]; count(ops, zktest.OpGetData) != want {
			t.Fatalf("acquire %d wrote %v; want %d getData", i, ops, want)
		}
		if (l.(*lease).child != nil) == (i == 0) {
			t.Fatalf("acquire %d: child watch %v", i, l.(*lease).child != nil)
		}
		st := in.Stat(l.(*lease).Path())
		if st == nil || int64(l.Token()) != st.Czxid || st.EphemeralOwner != s.ID() {
			t.Fatalf("token %d, node %+v", l.Token(), st)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if ops := log.take(); slices.Contains(ops, zktest.OpExists) || count(ops, zktest.OpDelete) != 1 {
			t.Fatalf("release wrote %v; want one delete and no read", ops)
		}
		if st := in.Stat(l.(*lease).Path()); st != nil {
			t.Fatalf("node left after Release: %+v", st)
		}
	}
}

// TestChildWatchEndsLease: a lease granted on the pipelined listing's
// child watch (no own-node read) still ends at once (recipe.ErrNodeDeleted) when
// someone else deletes its node: directly, and after a waiter joining
// spent the child watch (the lease then read its node with a watch).
func TestChildWatchEndsLease(t *testing.T) {
	t.Parallel()
	for _, joined := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "after a join"}[joined], func(t *testing.T) {
			cl := zktest.Shared(t)
			s := connect(t, cl.Servers())
			ws := connect(t, cl.Servers())
			q := newTestQueue(t, s, "/childwatch")
			wq := newTestQueue(t, ws, "/childwatch")
			in := zktest.Inspect(t, cl)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			l, err := q.Acquire(ctx, "lock-", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			l, err = q.Acquire(ctx, "lock-", nil)
			if err != nil {
				t.Fatal(err)
			}
			if l.(*lease).child == nil {
				t.Fatal("not granted on the child watch")
			}
			waiter := make(chan error, 1)
			if joined {
				go func() {
					wl, err := wq.Acquire(ctx, "lock-", nil)
					if err == nil {
						err = wl.Release(ctx)
					}
					waiter <- err
				}()
				serverkit.Eventually(t, 10*time.Second, "own node read after the join", func() bool {
					s.mu.Lock()
					defer s.mu.Unlock()
					return l.(*lease).arming && len(in.Children("/childwatch")) == 2
				})
				time.Sleep(100 * time.Millisecond) // the read's reply
				if err := l.Context().Err(); err != nil {
					t.Fatalf("lease ended by a join: %v", context.Cause(l.Context()))
				}
			}
			in.Delete(l.(*lease).Path())
			awaitNodeDeleted(t, l)
			if joined {
				if err := <-waiter; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestRelistGrantsOnChildWatch: a waiter two places back (listing
// [H, W1, W2]) wakes when W1 goes and re-lists with a child watch; the
// re-list grants it without a read of its node, and a deletion of its node
// by someone else still ends the lease.
func TestRelistGrantsOnChildWatch(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	var log opLog
	hs := connect(t, cl.Servers())
	s1 := connect(t, cl.Servers())
	s2 := connect(t, cl.Servers(), WithDialer(log.dialer()))
	in := zktest.Inspect(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h, err := newTestQueue(t, hs, "/relistwatch").Acquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	acq := func(q *Queue) <-chan acqResult { return acquireAsync(ctx, q) }
	w1 := acq(newTestQueue(t, s1, "/relistwatch"))
	serverkit.Eventually(t, 10*time.Second, "W1 queued", func() bool { return len(in.Children("/relistwatch")) == 2 })
	w2 := acq(newTestQueue(t, s2, "/relistwatch"))
	serverkit.Eventually(t, 10*time.Second, "W2 watching W1", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		return len(in.Children("/relistwatch")) == 3 && count(log.ops, zktest.OpGetData) == 1
	})
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r1 := <-w1
	if r1.err != nil {
		t.Fatal(r1.err)
	}
	log.take()
	if err := r1.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := <-w2
	if r2.err != nil {
		t.Fatal(r2.err)
	}
	if ops := log.take(); count(ops, zktest.OpGetChildren2) != 1 || slices.Contains(ops, zktest.OpGetData) || slices.Contains(ops, zktest.OpExists) {
		t.Fatalf("W2's wakeup wrote %v; want one listing and no read of its node", ops)
	}
	if r2.l.(*lease).child == nil {
		t.Fatal("W2 not granted on its re-list's child watch")
	}
	in.Delete(r2.l.(*lease).Path())
	awaitNodeDeleted(t, r2.l)
}

// awaitNodeDeleted waits (up to 5 s) for l to end with recipe.ErrNodeDeleted: its
// node was deleted by someone else.
func awaitNodeDeleted(t *testing.T, l recipe.Lease) {
	t.Helper()
	select {
	case <-l.Context().Done():
		if c := context.Cause(l.Context()); !errors.Is(c, recipe.ErrNodeDeleted) {
			t.Fatalf("lease ended with %v, want ErrNodeDeleted", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lease outlived the deletion of its node")
	}
}

// TestReleaseAfterDataWrite: a write to the lock node changes its version;
// Release's delete with the version it knows fails with BadVersion and the
// checked delete (owner and czxid) removes the node.
func TestReleaseAfterDataWrite(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	s := connect(t, cl.Servers())
	q := newTestQueue(t, s, "/relver")
	in := zktest.Inspect(t, cl)
	l, err := q.Acquire(context.Background(), "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Conn().Set(s.chroot+l.(*lease).Path(), []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := in.Stat(l.(*lease).Path()); st != nil {
		t.Fatalf("node left after Release: %+v", st)
	}
}

// TestReleaseRetryChecksOwner: Release's delete is lost with the
// connection (not applied), and while the client reconnects another
// session deletes the lock node and creates a node at the exact same path.
// The retried delete must read the node first and leave it (another
// session owns it), not delete it by its version (0, like the lease's).
func TestReleaseRetryChecksOwner(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	var armed atomic.Bool
	var target string // absolute path of the lease's node
	s := connect(t, cl.Servers(), WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if op != zktest.OpDelete || !armed.CompareAndSwap(true, false) {
			return zktest.Pass
		}
		// One transaction: the server reaps an emptied container directory,
		// which could take the parent away between a delete and a create.
		if _, err := in.Conn().Multi(&zk.DeleteRequest{Path: target, Version: -1},
			&zk.CreateRequest{Path: target, Data: []byte("foreign"), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeral}); err != nil {
			t.Errorf("foreign delete and create: %v", err)
		}
		return zktest.DropAndCut
	})))
	q := newTestQueue(t, s, "/relretry")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := q.Acquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	target = s.chroot + l.(*lease).Path()
	armed.Store(true)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if armed.Load() {
		t.Fatal("the release's delete was not intercepted")
	}
	st := in.Stat(l.(*lease).Path())
	if st == nil || st.EphemeralOwner != in.Conn().SessionID() {
		t.Fatalf("the other session's node at the lease's path was deleted or replaced: %+v", st)
	}
	if n := s.cleaner.pending(); n != 0 {
		t.Fatalf("%d cleanup items left", n)
	}
}

func count(ops []int32, op int32) int {
	n := 0
	for _, o := range ops {
		if o == op {
			n++
		}
	}
	return n
}

// acqResult is what an Acquire run by acquireAsync returned.
type acqResult struct {
	l   recipe.Lease
	err error
}

// acquireAsync runs q.Acquire(ctx, "lock-", nil) on a goroutine.
func acquireAsync(ctx context.Context, q *Queue) <-chan acqResult {
	ch := make(chan acqResult, 1)
	go func() {
		l, err := q.Acquire(ctx, "lock-", nil)
		ch <- acqResult{l, err}
	}()
	return ch
}

// awaitPredecessorWatch waits until the logged session has read (and
// watched) a predecessor since the log was last taken.
func (o *opLog) awaitPredecessorWatch(t *testing.T) {
	t.Helper()
	serverkit.Eventually(t, 10*time.Second, "waiter watching", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return count(o.ops, zktest.OpGetData) >= 1 // the predecessor
	})
}
