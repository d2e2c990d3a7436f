package zookeeper

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestSkipRelistOnlyWhenProven: a waiter whose only predecessor is deleted
// decides with an exists on its own node instead of a listing; the
// conditions of the argument, each broken in turn, make it list again.
func TestSkipRelistOnlyWhenProven(t *testing.T) {
	t.Parallel()
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
		return w.deleted && q.contract.skipCandidate(nodes, self, watch)
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
		"the rule does not grant the lowest": skips(&Queue{d: qdir{kinds: []string{"lock-"}}, contract: ruleContract{grantsLowest: true, rule: func([]NodeName, int) (bool, []int) { return false, []int{0} }}}, two, 1, []int{0}, fired),
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
	t.Parallel()
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
		serverkit.Eventually(t, 10*time.Second, "waiter queued", func() bool {
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
		// The holder learns of its node's delete from its own session's
		// watch event, which a loaded machine can deliver after the waiter
		// has returned: its lease must end, then Release reports the loss.
		select {
		case <-held.Context().Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the holder's lease did not end after its node was deleted", round)
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
	t.Parallel()
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
