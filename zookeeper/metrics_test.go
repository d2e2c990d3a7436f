package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// recorder is a recipe.Metrics that records every call as a line of text.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

func (r *recorder) AcquireStarted(kind, dir string) { r.add("started %s %s", kind, dir) }
func (r *recorder) AcquireDone(kind, dir string, took time.Duration, err error) {
	switch {
	case took <= 0:
		r.add("done %s %s with a non-positive duration %v", kind, dir, took)
	case err == nil:
		r.add("done %s %s ok", kind, dir)
	case errors.Is(err, recipe.ErrLocked):
		r.add("done %s %s locked", kind, dir)
	default:
		r.add("done %s %s %v", kind, dir, err)
	}
}
func (r *recorder) Waiting(kind, dir string, delta int) { r.add("waiting %s %s %+d", kind, dir, delta) }
func (r *recorder) LeaseLost(kind, dir string, cause error) {
	r.add("lost %s %s deleted=%v", kind, dir, errors.Is(cause, recipe.ErrNodeDeleted))
}
func (r *recorder) SessionState(from, to recipe.ConnState, cause error) {
	r.add("state %v->%v closed=%v", from, to, errors.Is(cause, recipe.ErrSessionClosed))
}
func (r *recorder) StaleRejected(e *fence.StaleError) {
	r.add("stale %s %v<%v", e.Resource, e.Token, e.Highest)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	return l
}

// TestMetricsHook: every event of an acquisition's life reaches the hook
// once, with the recipe's kind and directory: a grant, a TryAcquire that
// finds the lock held, a waiter queued and granted, a lease ended by an
// operator's delete (lost), a Release (not lost), the session's states
// including Close, and a stale write rejected by a fence.Guard wired to it.
func TestMetricsHook(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	rec := &recorder{}
	s := connect(t, cl.Servers(), WithMetrics(rec))
	if got := rec.take(); strings.Join(got, "|") != "state UNKNOWN->CONNECTED closed=false" {
		t.Fatalf("after Connect: %q", got)
	}
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
	want := []string{
		"started lock /metered", "done lock /metered ok",
		"started lock /metered", "done lock /metered locked",
	}
	if got := rec.take(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("grant and TryAcquire:\n got %q\nwant %q", got, want)
	}

	ch := make(chan error, 1)
	var b recipe.Lease
	go func() {
		var err error
		b, err = q.Acquire(ctx, "lock-", nil)
		ch <- err
	}()
	zktest.Eventually(t, 10*time.Second, "the second contender queued", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.lines) == 2
	})
	in.Delete("/metered/" + path0(t, in.Children("/metered")))
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	<-a.Context().Done()
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	want = []string{
		"started lock /metered", "waiting lock /metered +1",
		"lost lock /metered deleted=true",
		"waiting lock /metered -1", "done lock /metered ok",
	}
	// The loss is reported from the event delivery, the rest from the
	// waiter's goroutine: compare without order.
	got := rec.take()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("queued, holder deleted, granted, released:\n got %q\nwant %q", got, want)
	}

	var guard fence.Guard
	guard.OnStale = rec.StaleRejected
	guard.Check("db", b.Token())
	guard.Check("db", a.Token())
	s.Close()
	want = []string{
		fmt.Sprintf("stale db %v<%v", a.Token(), b.Token()),
		"state CONNECTED->LOST closed=true",
	}
	if got := rec.take(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("stale write and Close:\n got %q\nwant %q", got, want)
	}
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
