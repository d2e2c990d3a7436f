package memlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
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
	default:
		r.add("done %s %s %v", kind, dir, err)
	}
}
func (r *recorder) Waiting(kind, dir string, delta int) { r.add("waiting %s %s %+d", kind, dir, delta) }
func (r *recorder) LeaseLost(kind, dir string, cause error) {
	r.add("lost %s %s %v", kind, dir, cause)
}
func (r *recorder) SessionState(from, to recipe.ConnState, cause error) {
	r.add("state %v->%v", from, to)
}
func (r *recorder) StaleRejected(e *fence.StaleError) { r.add("stale %s", e.Resource) }

// take returns the lines recorded since the last take, sorted when
// unordered (events of several goroutines).
func (r *recorder) take(unordered bool) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	if unordered {
		slices.Sort(l)
	}
	return strings.Join(l, "|")
}

// TestMetrics: a Session's WithMetrics reports each acquisition (a grant, a
// TryAcquire that finds the lock held), a waiter queued and granted, a
// lease lost by a cut-off and one ended by Close, with kind "lock" and the
// lock's name; a Release is no loss, and there are no session states.
func TestMetrics(t *testing.T) {
	srv := newServer(testTTL, correct)
	defer srv.Close()
	rec := &recorder{}
	quiet := WithLogger(slog.New(slog.DiscardHandler))
	a, b := srv.Connect(WithMetrics(rec), quiet), srv.Connect(WithMetrics(rec), quiet)
	defer a.Close()
	ma, mb := mustNew(t, a, "job"), mustNew(t, b, "job")
	ctx := context.Background()

	la, err := ma.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mb.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire while held: %v", err)
	}
	want := "started lock job|done lock job ok|started lock job|done lock job recipe: held by another participant: job"
	if got := rec.take(false); got != want {
		t.Fatalf("grant and TryAcquire:\n got %q\nwant %q", got, want)
	}

	ch := make(chan error, 1)
	var lb recipe.Lease
	go func() {
		var err error
		lb, err = mb.Acquire(ctx)
		ch <- err
	}()
	waitEntries(t, srv, "job", 2, "the waiter queued")
	a.CutOff()
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	want = "done lock job ok|lost lock job recipe: connection suspended|started lock job|waiting lock job +1|waiting lock job -1"
	if got := rec.take(true); got != want {
		t.Fatalf("queued, holder cut off, granted:\n got %q\nwant %q", got, want)
	}
	if err := la.Release(ctx); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Fatalf("Release after the loss: %v", err)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if lb, err = mb.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	want = "started lock job|done lock job ok|lost lock job recipe: session closed"
	if got := rec.take(false); got != want {
		t.Fatalf("Releases, a grant, Close:\n got %q\nwant %q", got, want)
	}
}
