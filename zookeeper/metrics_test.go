package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/metricstest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestMetricsHook: every event of an acquisition's life reaches the hook
// once, with the recipe's kind and directory: a grant, a TryAcquire that
// finds the lock held, a waiter queued and granted, a lease ended by an
// operator's delete (lost), a Release (not lost), the session's states
// including Close, and a stale write rejected by a fence.Guard wired to it.
func TestMetricsHook(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	rec := &metricstest.Events{}
	s := connect(t, cl.Servers(), WithMetrics(rec))
	rec.Expect(t, "Connect", "state UNKNOWN CONNECTED nil")
	q, err := NewQueue(s, "/metered", []string{"lock-"}, FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	a, err := q.Acquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.TryAcquire(ctx, "lock-", nil); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire while held: %v", err)
	}
	rec.Expect(t, "grant and TryAcquire",
		"started lock /metered", "done lock /metered nil",
		"started lock /metered", "done lock /metered locked")

	ch := make(chan error, 1)
	var b recipe.Lease
	go func() {
		var err error
		b, err = q.Acquire(ctx, "lock-", nil)
		ch <- err
	}()
	rec.WaitFor(t, 10*time.Second, "waiting lock /metered +1") // the second contender queued
	in.Delete("/metered/" + path0(t, in.Children("/metered")))
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	<-a.Context().Done()
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The loss is reported from the event delivery, the rest from the
	// waiter's goroutine: compare without order.
	rec.ExpectAnyOrder(t, "queued, holder deleted, granted, released",
		"started lock /metered", "waiting lock /metered +1",
		"lost lock /metered node_deleted",
		"waiting lock /metered -1", "done lock /metered nil")

	var guard fence.Guard
	guard.OnStale = rec.StaleRejected
	guard.Check("db", b.Token())
	guard.Check("db", a.Token())
	s.Close()
	rec.Expect(t, "stale write and Close",
		fmt.Sprintf("stale db %v<%v", a.Token(), b.Token()),
		"state CONNECTED LOST session_closed")
}

// path0 returns the first of two queued nodes, or fails.
func path0(t *testing.T, children []string) string {
	t.Helper()
	if len(children) != 2 {
		t.Fatalf("want holder and waiter, got %q", children)
	}
	n := parseChildren(children, []string{"lock-"})
	return n[0].Name
}
