package fencetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
)

// Admit is what [RunAdmit] needs of a backend whose Admit hands its write
// a batch (etcd's AddOps, Redis's AddWrites).
type Admit struct {
	Fence fence.Fence
	// Add adds to ctx's batch a write of value to the data (read by Get).
	Add func(ctx context.Context, value string) error
	// AddBad adds to ctx's batch a write the backend refuses (one of the
	// fence's own key of resource "r"); ErrBad is what Admit answers.
	AddBad func(ctx context.Context) error
	ErrBad error
	// ErrNoBatch is Add's answer outside a running write.
	ErrNoBatch error
	// Get reads the data.
	Get func() string
	// Reported, if not nil, counts the stale writes the fence reported to
	// its OnStale: once for each refusal, and for nothing else.
	Reported func() int
}

// RunAdmit: the writes write adds land with the token; a stale token is
// refused before write runs; write's error and a token that becomes stale
// while write runs apply nothing; a refused write is refused; adding
// outside an Admit (or after it returned) is refused; an empty resource
// and a zero token are refused.
func RunAdmit(t *testing.T, a Admit) {
	t.Helper()
	f, ctx := a.Fence, context.Background()
	add := func(v string) func(context.Context) error {
		return func(ctx context.Context) error { return a.Add(ctx, v) }
	}
	if err := f.Admit(ctx, "r", 5, add("v5")); err != nil {
		t.Fatal(err)
	}
	called := false
	err := f.Admit(ctx, "r", 4, func(context.Context) error { called = true; return nil })
	if se := (*fence.StaleError)(nil); !errors.As(err, &se) || se.Highest != 5 || called {
		t.Fatalf("stale Admit: %v (write called: %v)", err, called)
	}
	a.checkReported(t, 1)
	boom := errors.New("boom")
	err = f.Admit(ctx, "r", 6, func(ctx context.Context) error { _ = add("v6")(ctx); return boom })
	if !errors.Is(err, boom) || a.Get() != "v5" {
		t.Fatalf("failed write: %v, data %q", err, a.Get())
	}
	// A newer holder writes while this write runs: its writes are dropped.
	err = f.Admit(ctx, "r", 6, func(ctx context.Context) error {
		if err := f.Admit(context.Background(), "r", 7, add("v7")); err != nil {
			return err
		}
		return add("v6")(ctx)
	})
	if !errors.Is(err, fence.ErrStale) || a.Get() != "v7" {
		t.Fatalf("token stale at commit: %v, data %q", err, a.Get())
	}
	a.checkReported(t, 2)
	if err := f.Admit(ctx, "r", 7, nil); err != nil {
		t.Fatalf("nil write: %v", err)
	}
	if err := f.Admit(ctx, "r", 7, a.AddBad); !errors.Is(err, a.ErrBad) {
		t.Fatalf("an added delete of the fence key: %v", err)
	}
	var kept context.Context // a write's ctx used after its Admit returned
	if err := f.Admit(ctx, "r", 7, func(ctx context.Context) error { kept = ctx; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := a.Add(kept, "x"); !errors.Is(err, a.ErrNoBatch) {
		t.Fatalf("added after Admit returned: %v", err)
	}
	if err := a.Add(ctx, "x"); !errors.Is(err, a.ErrNoBatch) {
		t.Fatalf("added outside Admit: %v", err)
	}
	if err := f.Admit(ctx, "", 7, nil); !errors.Is(err, fence.ErrBadResource) {
		t.Fatalf("empty resource: %v", err)
	}
	if err := f.Admit(ctx, "r", 0, nil); !errors.Is(err, fence.ErrNoToken) {
		t.Fatalf("zero token: %v", err)
	}
	a.checkReported(t, 2)
}

func (a Admit) checkReported(t *testing.T, want int) {
	t.Helper()
	if a.Reported != nil {
		if got := a.Reported(); got != want {
			t.Fatalf("the fence reported %d stale writes to OnStale, want %d", got, want)
		}
	}
}

// CountStale returns an OnStale for a fence and the count of the stale
// writes reported to it so far (safe for concurrent use).
func CountStale() (onStale func(*fence.StaleError), count func() int) {
	var n atomic.Int64
	return func(*fence.StaleError) { n.Add(1) }, func() int { return int(n.Load()) }
}
