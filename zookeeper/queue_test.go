package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestTicketErrFollowsItsGrant: a Ticket whose grant is released (which
// deletes its node) or whose node is deleted by someone else reports that
// at once, and Await says the same; Leave is then a no-op.
func TestTicketErrFollowsItsGrant(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s := connect(t, cl.Servers())
	q, err := NewQueue(s, "/tickets", []string{"t-"}, FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	a, err := q.Join(ctx, "t-", nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.Await(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Err(); err != nil {
		t.Fatalf("Err while granted: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Err(); !errors.Is(err, recipe.ErrReleased) {
		t.Fatalf("Err after the grant's Release: %v, want ErrReleased", err)
	}
	if _, err := a.Await(ctx); !errors.Is(err, recipe.ErrReleased) {
		t.Fatalf("Await after the grant's Release: %v, want ErrReleased", err)
	}
	if err := a.Leave(ctx); err != nil {
		t.Fatalf("Leave of a released ticket: %v", err)
	}

	b, err := q.Join(ctx, "t-", nil)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Await(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in.Delete("/tickets/" + b.Name())
	<-lb.Context().Done()
	if err := b.Err(); !errors.Is(err, recipe.ErrNodeDeleted) {
		t.Fatalf("Err after an operator deleted the node: %v, want ErrNodeDeleted", err)
	}
	if n := in.Children("/tickets"); len(n) != 0 {
		t.Fatalf("left behind: %v", n)
	}
}

// TestObserveHeadAsBadInput: a nil queue or conversion is a typed error,
// never a panic on the observer's goroutine.
func TestObserveHeadAsBadInput(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	s := connect(t, cl.Servers())
	q, err := NewQueue(s, "/observed", []string{"t-"}, FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	if ch, err := zkside.ObserveHeadAs[Head, int](context.Background(), q, nil); !errors.Is(err, recipe.ErrBadOption) || ch != nil {
		t.Fatalf("nil conv: %v, %v; want recipe.ErrBadOption and no channel", ch, err)
	}
	if _, err := zkside.ObserveHeadAs(context.Background(), nil, func(Head) int { return 0 }); !errors.Is(err, recipe.ErrBadOption) {
		t.Fatalf("nil queue: %v; want ErrBadOption", err)
	}
}

// TestQueueOptionsChecked: the declared contract is checked and applied
// where it is given: anchor kinds must be the queue's own, and a queue
// declared AllowsAnchors, of one kind or more, sizes its requests for
// anchored names.
func TestQueueOptionsChecked(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	s := connect(t, cl.Servers())
	plain, err := NewQueue(s, "/declared", []string{"t-"}, FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	anchored, err := NewQueue(s, "/declared", []string{"t-"}, FirstHolds, AllowsAnchors())
	if err != nil {
		t.Fatalf("anchors in a one-kind queue: %v", err)
	}
	if anchored.d.reqSize <= plain.d.reqSize {
		t.Fatalf("request size %d with anchors, %d without: no room for anchored names", anchored.d.reqSize, plain.d.reqSize)
	}
	if _, err := NewQueue(s, "/declared", []string{"w-", "r-"}, FirstHolds, AllowsAnchors("x-")); !errors.Is(err, recipe.ErrBadOption) {
		t.Fatalf("a foreign anchor kind: %v, want ErrBadOption", err)
	}
	q, err := NewQueue(s, "/declared", []string{"w-", "r-"}, FirstHolds, AllowsAnchors("w-"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := q.contract; !c.anchors || c.grantsLowest || !slices.Equal(c.anchorKinds, []string{"w-"}) {
		t.Fatalf("contract %+v", c)
	}
}

// TestRulePanicGivesNodeUp: a Rule that panics (here it indexes past the
// end of the listing) makes Acquire and TryAcquire return recipe.ErrBadOption
// instead of panicking, with nothing left behind: no node, no registered
// lease, nothing for Drain to wait for; another client then takes the lock.
func TestRulePanicGivesNodeUp(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s1 := connect(t, cl.Servers())
	s2 := connect(t, cl.Servers())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bad := func(nodes []NodeName, self int) (bool, []int) {
		return nodes[self+1].Seq > 0, nil // out of range when self is last
	}
	q1, err := NewQueue(s1, "/rulepanic", []string{"lock-"}, bad, GrantsLowest())
	if err != nil {
		t.Fatal(err)
	}
	q2 := newTestQueue(t, s2, "/rulepanic")
	attempt := func(name string, f func() (recipe.Lease, error)) {
		t.Helper()
		var l recipe.Lease
		var err error
		func() {
			defer func() {
				if v := recover(); v != nil {
					err = fmt.Errorf("panicked: %v", v)
				}
			}()
			l, err = f()
		}()
		if !errors.Is(err, recipe.ErrBadOption) || l != nil {
			t.Fatalf("%s with a panicking rule: %v, %v; want ErrBadOption", name, l, err)
		}
		if err := q1.Drain(ctx); err != nil {
			t.Fatalf("%s: Drain: %v", name, err)
		}
		s1.mu.Lock()
		left := len(s1.leases.byPath)
		s1.mu.Unlock()
		if left != 0 {
			t.Fatalf("%s: %d leases still registered", name, left)
		}
		if n := in.Owned("/rulepanic", s1.ID()); len(n) != 0 {
			t.Fatalf("%s: node left behind: %v", name, n)
		}
	}
	attempt("Acquire", func() (recipe.Lease, error) { return q1.Acquire(ctx, "lock-", nil) })
	attempt("Acquire again", func() (recipe.Lease, error) { return q1.Acquire(ctx, "lock-", nil) }) // the queue found uncontended: child watch
	attempt("TryAcquire", func() (recipe.Lease, error) { return q1.TryAcquire(ctx, "lock-", nil) })
	h, err := q2.Acquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	attempt("Acquire behind a holder", func() (recipe.Lease, error) { return q1.Acquire(ctx, "lock-", nil) })
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := q2.TryAcquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatalf("another client after the panics: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := in.Children("/rulepanic"); len(n) != 0 {
		t.Fatalf("left behind: %v", n)
	}
}

// TestTryAcquireLockedNamesWatched: TryAcquire's recipe.ErrLocked names the nodes
// the caller would wait for (the Rule's watch list), not the lowest node:
// for a two-permit gate, both holders.
func TestTryAcquireLockedNamesWatched(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	s := connect(t, cl.Servers())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	two := func(_ []NodeName, self int) (bool, []int) {
		if self < 2 {
			return true, nil
		}
		return false, []int{self - 1} // the newer holder only
	}
	q, err := NewQueue(s, "/lockedmsg", []string{"gate-"}, two, GrantsLowest())
	if err != nil {
		t.Fatal(err)
	}
	a, err := q.Acquire(ctx, "gate-", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	b, err := q.Acquire(ctx, "gate-", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	_, err = q.TryAcquire(ctx, "gate-", nil)
	if !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire: %v, want ErrLocked", err)
	}
	an, bn := path.Base(a.(*lease).path), path.Base(b.(*lease).path)
	if msg := err.Error(); !strings.Contains(msg, bn) || strings.Contains(msg, an) {
		t.Fatalf("ErrLocked %q: want it to name %s (watched), not %s", msg, bn, an)
	}
}

// TestDrainWaitsForExtraCopies: the extra copies of a node that a lost
// create reply left (findByGUID adopts the first and deletes the others)
// are counted by their Queue: a delete of one that waits for a
// reconnection keeps Drain waiting (case C12: no node after Close).
func TestDrainWaitsForExtraCopies(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	var armed atomic.Bool
	s := connect(t, cl.Servers(), WithDialer(zktest.RequestHook(p.Dial, func(op int32) zktest.Fault {
		if op == zktest.OpDelete && armed.CompareAndSwap(true, false) {
			p.Cut() // the delete goes to the cleaner: down until Resume
			return zktest.DropAndCut
		}
		return zktest.Pass
	})))
	q := newTestQueue(t, s, "/dups")
	guid := newGUID()
	prefix := q.d.adir + "/" + nodePrefix(guid, "lock-", false, 0)
	var names []string
	for range 2 {
		n, err := s.conn.Create(prefix, nil, zk.FlagEphemeral|zk.FlagSequence, s.cfg.acl)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, path.Base(n))
	}
	armed.Store(true)
	name, err := q.d.findByGUID(guid)
	if err != nil || name != names[0] {
		t.Fatalf("findByGUID: %q, %v; want %q", name, err, names[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = q.Drain(ctx)
	cancel()
	if err == nil {
		t.Fatal("Drain returned while the delete of the extra copy waits for a reconnection")
	}
	p.Resume()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Drain(ctx); err != nil {
		t.Fatalf("Drain after the reconnection: %v", err)
	}
	if c := in.Children("/dups"); !slices.Equal(c, names[:1]) {
		t.Fatalf("left %v; want only the adopted %v", c, names[:1])
	}
}
