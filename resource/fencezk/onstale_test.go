package fencezk_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencezk"
	"github.com/zkrecipes/zkrecipes/testkit/fencetest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestOnStale: a write the Fence (Admit) or a Register (Write, Apply)
// refuses for a stale token is reported to its OnStale once, and a
// Register of the Fence reports to the Fence's; accepted writes, bad input
// and a floor below the token are not.
func TestOnStale(t *testing.T) {
	s := connect(t, zktest.Shared(t))
	ctx := context.Background()
	f, err := fencezk.NewFence(s, "/onstale/fences")
	if err != nil {
		t.Fatal(err)
	}
	onStale, reported := fencetest.CountStale()
	f.OnStale = onStale
	if err := f.Admit(ctx, "r", 5, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Admit(ctx, "r", 4, nil); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Admit: %v", err)
	}
	if err := f.Admit(ctx, "", 4, nil); err == nil {
		t.Fatal("Admit of an empty resource accepted")
	}
	fr, err := f.Register("r")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fr.Write(ctx, 3, nil); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Write of the fence's register: %v", err)
	}
	if n := reported(); n != 2 {
		t.Fatalf("the fence reported %d stale writes, want 2", n)
	}

	r := newRegister(t, s, "/onstale/register")
	r.OnStale, reported = fencetest.CountStale()
	if _, err := r.Write(ctx, 5, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write(ctx, 4, []byte("w")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Write: %v", err)
	}
	if _, _, err := r.Apply(ctx, 4, nil); err == nil {
		t.Fatal("Apply of a nil op accepted")
	}
	if _, _, err := r.Apply(ctx, 4, &zk.SetDataRequest{Path: "/onstale/data", Version: -1}); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Apply: %v", err)
	}
	if _, err := r.RaiseFloor(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if n := reported(); n != 2 {
		t.Fatalf("the register reported %d stale writes, want 2", n)
	}
}
