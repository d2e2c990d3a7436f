package fenceredis_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fenceredis"
	"github.com/zkrecipes/zkrecipes/testkit/fencetest"
)

// TestOnStale: a write Do or a Register refuses for a stale token is
// reported to OnStale once; accepted writes, bad input and a floor below
// the token are not (Admit: TestAdmit).
func TestOnStale(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	f := e.fence(t)
	onStale, reported := fencetest.CountStale()
	f.OnStale = onStale
	if _, err := f.Do(ctx, "s", 5); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Do(ctx, "s", 4); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Do: %v", err)
	}
	if _, err := f.Do(ctx, "", 4); err == nil {
		t.Fatal("Do of an empty resource accepted")
	}
	if _, err := f.RaiseFloor(ctx, "s", 3); err != nil {
		t.Fatal(err)
	}
	if n := reported(); n != 1 {
		t.Fatalf("the fence reported %d stale writes, want 1", n)
	}
	r, err := fenceredis.NewRegister(e.cli, e.prefix+"register")
	if err != nil {
		t.Fatal(err)
	}
	r.OnStale, reported = fencetest.CountStale()
	if _, err := r.Write(ctx, 5, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write(ctx, 4, []byte("w")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Write: %v", err)
	}
	if _, err := r.RaiseFloor(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if n := reported(); n != 1 {
		t.Fatalf("the register reported %d stale writes, want 1", n)
	}
}
