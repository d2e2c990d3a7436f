package memlock

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/metricstest"
)

// TestMetrics: a Session's WithMetrics reports each acquisition (a grant, a
// TryAcquire that finds the lock held), a waiter queued and granted, a
// lease lost by a cut-off and one ended by Close, with kind "lock" and the
// lock's name; a Release is no loss, and there are no session states.
func TestMetrics(t *testing.T) {
	srv := newServer(testTTL, correct)
	defer srv.Close()
	rec := &metricstest.Events{Messages: true}
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
	rec.Expect(t, "grant and TryAcquire", "started lock job", "done lock job nil",
		"started lock job", "done lock job locked (recipe: held by another participant: job)")

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
	rec.ExpectAnyOrder(t, "queued, holder cut off, granted", "done lock job nil",
		"lost lock job suspended (recipe: connection suspended)",
		"started lock job", "waiting lock job +1", "waiting lock job -1")
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
	rec.Expect(t, "Releases, a grant, Close", "started lock job", "done lock job nil",
		"lost lock job session_closed (recipe: session closed)")
}
