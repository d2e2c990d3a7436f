package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
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
	if err := q.ensureDir(); err != nil {
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
				zktest.Eventually(t, 10*time.Second, "own node read after the join", func() bool {
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
	zktest.Eventually(t, 10*time.Second, "W1 queued", func() bool { return len(in.Children("/relistwatch")) == 2 })
	w2 := acq(newTestQueue(t, s2, "/relistwatch"))
	zktest.Eventually(t, 10*time.Second, "W2 watching W1", func() bool {
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

// TestSkipRelistOnlyWhenProven: a waiter whose only predecessor is deleted
// decides with an exists on its own node instead of a listing; the
// conditions of the argument, each broken in turn, make it list again.
func TestSkipRelistOnlyWhenProven(t *testing.T) {
	cl := zktest.Shared(t)
	var log opLog
	hs := connect(t, cl.Servers())
	ws := connect(t, cl.Servers(), WithDialer(log.dialer()))
	hq := newTestQueue(t, hs, "/skip")
	wq := newTestQueue(t, ws, "/skip")
	ctx := context.Background()
	held, err := hq.Acquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	log.take()
	ch := acquireAsync(ctx, wq)
	log.awaitPredecessorWatch(t)
	log.take()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	if ops := log.take(); slices.Contains(ops, zktest.OpGetChildren2) || count(ops, zktest.OpGetData) != 1 {
		t.Fatalf("wakeup wrote %v; want one getData on the own node and no listing", ops)
	}
	if !r.l.(*lease).arming {
		t.Fatal("granted on the skip without its own-node watch")
	}
	r.l.Release(ctx)

	// The conditions, on a listing [P, self] (and variants).
	node := func(seq int32, anchored bool) NodeName {
		n := NodeName{Name: nodePrefix(newGUID(), "lock-", anchored, seq-1) + formatSeq(seq), Kind: "lock-", Seq: seq}
		if anchored {
			n.Anchored, n.Anchor = true, seq-1
		}
		return n
	}
	two := []NodeName{node(1, false), node(2, false)}
	// The loop skips on skipCandidate and a wakeup by deletion.
	skips := func(q *Queue, nodes []NodeName, self int, watch []int, w *wakeup) bool {
		return w.deleted && (&fastWait{q: q}).skipCandidate(nodes, self, watch)
	}
	fired := &wakeup{deleted: true}
	changed := &wakeup{deleted: false}
	if !skips(wq, two, 1, []int{0}, fired) {
		t.Fatal("the proven case was not skipped")
	}
	three := []NodeName{node(1, false), node(2, false), node(3, false)}
	rw, _ := NewQueue(ws, "/skip", []string{"write-", "read-"}, FirstHolds, GrantsLowest(), AllowsAnchors())
	undeclared, _ := NewQueue(ws, "/skip", []string{"lock-"}, FirstHolds)
	for what, ok := range map[string]bool{
		"data change, not a deletion":        skips(wq, two, 1, []int{0}, changed),
		"more than one lower node":           skips(wq, three, 2, []int{1}, fired),
		"an anchored node in the listing":    skips(wq, []NodeName{node(1, false), node(2, true), node(3, false)}, 2, []int{1}, fired),
		"an anchored node before self only":  skips(wq, []NodeName{node(2, true), node(3, false)}, 1, []int{0}, fired),
		"a queue with anchors (rw lock)":     skips(rw, two, 1, []int{0}, fired),
		"a rule not declared GrantsLowest":   skips(undeclared, two, 1, []int{0}, fired),
		"the rule does not grant the lowest": skips(&Queue{kinds: []string{"lock-"}, contract: ruleContract{grantsLowest: true}, rule: func([]NodeName, int) (bool, []int) { return false, []int{0} }}, two, 1, []int{0}, fired),
	} {
		if ok {
			t.Errorf("%s: skipped", what)
		}
	}
}

// TestSkipRelistNotWhenOwnNodeGoesWithPredecessor: the predecessor and the
// waiter's own node are deleted in one transaction (one zxid): the
// predecessor's event arrives first, yet the waiter must not be granted:
// Acquire returns recipe.ErrNodeDeleted.
func TestSkipRelistNotWhenOwnNodeGoesWithPredecessor(t *testing.T) {
	cl := zktest.Shared(t)
	hs := connect(t, cl.Servers())
	ws := connect(t, cl.Servers())
	hq := newTestQueue(t, hs, "/skipmulti")
	wq := newTestQueue(t, ws, "/skipmulti")
	in := zktest.Inspect(t, cl)
	ctx := context.Background()
	for round := 0; round < 5; round++ {
		held, err := hq.Acquire(ctx, "lock-", nil)
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan error, 1)
		go func() {
			l, err := wq.Acquire(ctx, "lock-", nil)
			if err == nil {
				l.Release(ctx)
			}
			ch <- err
		}()
		var kids []string
		zktest.Eventually(t, 10*time.Second, "waiter queued", func() bool {
			kids = in.Children("/skipmulti")
			return len(kids) == 2
		})
		time.Sleep(50 * time.Millisecond) // let the waiter set its watches
		nodes := parseChildren(kids, []string{"lock-"})
		base := ws.chroot + "/skipmulti/"
		if _, err := in.Conn().Multi(&zk.DeleteRequest{Path: base + nodes[0].Name, Version: -1},
			&zk.DeleteRequest{Path: base + nodes[1].Name, Version: -1}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-ch:
			if !errors.Is(err, recipe.ErrNodeDeleted) {
				t.Fatalf("round %d: waiter's Acquire returned %v, want ErrNodeDeleted", round, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("waiter hangs")
		}
		if err := held.Release(ctx); !errors.Is(err, recipe.ErrLeaseLost) {
			t.Fatalf("holder's Release: %v", err)
		}
	}
}

// TestSkipRelistAnchoredRefused: in a one-kind queue not declared
// AllowsAnchors, the holder's session asks for an anchored node taking the
// holder's place while a waiter (another session) waits behind the holder
// with the listing [holder, waiter]. Were the anchored node made, it would sort before the
// waiter once the holder's node goes, and the waiter, granting without a
// re-list (the skip), would hold together with it. AcquireAnchored must
// refuse a queue not declared AllowsAnchors (recipe.ErrBadOption, no node made),
// and the holder's release then grants the waiter alone.
func TestSkipRelistAnchoredRefused(t *testing.T) {
	cl := zktest.Shared(t)
	var log opLog
	hs := connect(t, cl.Servers())
	ws := connect(t, cl.Servers(), WithDialer(log.dialer()))
	hq := newTestQueue(t, hs, "/skipanchor")
	wq := newTestQueue(t, ws, "/skipanchor")
	in := zktest.Inspect(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	held, err := hq.Acquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	log.take()
	waiter := acquireAsync(ctx, wq)
	log.awaitPredecessorWatch(t)
	anchored := make(chan acqResult, 1)
	actx, acancel := context.WithTimeout(ctx, 3*time.Second)
	defer acancel()
	go func() {
		l, err := hq.AcquireAnchored(actx, "lock-", nil, held)
		anchored <- acqResult{l, err}
	}()
	var a acqResult
	select {
	case a = <-anchored:
	case <-time.After(time.Second):
		// The anchored node was made and waits behind its anchor.
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-waiter
	if w.err != nil {
		t.Fatalf("waiter: %v", w.err)
	}
	defer w.l.Release(ctx)
	if a.l == nil && a.err == nil {
		a = <-anchored
	}
	if a.l != nil {
		live := w.l.Context().Err() == nil && a.l.Context().Err() == nil
		a.l.Release(ctx)
		t.Fatalf("anchored node granted in a queue not declared AllowsAnchors (both held at once: %v)", live)
	}
	if !errors.Is(a.err, recipe.ErrBadOption) {
		t.Fatalf("AcquireAnchored on a queue not declared AllowsAnchors: %v, want ErrBadOption", a.err)
	}
	if kids := in.Children("/skipanchor"); len(kids) != 1 {
		t.Fatalf("children %v, want the waiter's node only", kids)
	}
}

// TestReleaseRetryChecksOwner: Release's delete is lost with the
// connection (not applied), and while the client reconnects another
// session deletes the lock node and creates a node at the exact same path.
// The retried delete must read the node first and leave it (another
// session owns it), not delete it by its version (0, like the lease's).
func TestReleaseRetryChecksOwner(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	var armed atomic.Bool
	var target string // absolute path of the lease's node
	s := connect(t, cl.Servers(), WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if op != zktest.OpDelete || !armed.CompareAndSwap(true, false) {
			return zktest.Pass
		}
		if err := in.Conn().Delete(target, -1); err != nil {
			t.Errorf("foreign delete: %v", err)
		}
		if _, err := in.Conn().Create(target, []byte("foreign"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Errorf("foreign create: %v", err)
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

// TestCloseStopsWorkers: a session with many requests in flight on its
// worker pool (50 waiters behind a holder, each with a cancellable ctx, and
// one function that is slow to return) is closed; when Close returns, no
// worker goroutine is left, running or parked.
func TestCloseStopsWorkers(t *testing.T) {
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
	zktest.Eventually(t, 10*time.Second, "waiters queued", func() bool {
		return len(in.Children("/closeworkers")) == waiters+1
	})
	if n := countWorkers(ws); n == 0 {
		t.Fatal("no worker running before Close: the test proves nothing")
	}
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
	zktest.Eventually(t, 200*time.Millisecond, "no worker goroutine after Session.Close", func() bool { return countWorkers(ws) == 0 })
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
	zktest.Eventually(t, 30*time.Second, "waiters queued", func() bool { return len(in.Children("/waiterheap")) == waiters+1 })
	zktest.Eventually(t, 10*time.Second, "waiters watching", func() bool {
		n, err := zktest.WatchCount(ctx, strings.SplitN(cl.Servers()[0], "/", 2)[0])
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
	zktest.Eventually(t, 10*time.Second, "waiter watching", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return count(o.ops, zktest.OpGetData) >= 1 // the predecessor
	})
}
