package fencebatch

import (
	"context"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCollect: items added during write come back in order; a refused
// item adds nothing; a kept ctx, a plain ctx and another item type add
// nothing; write's error comes back with the items.
func TestCollect(t *testing.T) {
	bad := errors.New("bad")
	check := func(s string) error {
		if s == "x" {
			return bad
		}
		return nil
	}
	var kept context.Context
	boom := errors.New("boom")
	items, err := Collect(context.Background(), check, func(ctx context.Context) error {
		kept = ctx
		if ok, err := Add(ctx, "a", "b"); !ok || err != nil {
			t.Errorf("Add: %v %v", ok, err)
		}
		if ok, err := Add(ctx, "c", "x"); ok || !errors.Is(err, bad) || err.Error() != "op 1: bad" {
			t.Errorf("Add of a refused item: %v %v", ok, err)
		}
		if ok, err := Add(ctx, 1); ok || err != nil {
			t.Errorf("Add of another type: %v %v", ok, err)
		}
		return boom
	})
	if !errors.Is(err, boom) || len(items) != 2 || items[0] != "a" || items[1] != "b" {
		t.Fatalf("Collect: %v %v", items, err)
	}
	if ok, err := Add(kept, "d"); ok || err != nil {
		t.Fatalf("Add after write returned: %v %v", ok, err)
	}
	if ok, err := Add(context.Background(), "d"); ok || err != nil {
		t.Fatalf("Add outside: %v %v", ok, err)
	}
}

// TestAdmit: a token below the highest is refused before write runs; a nil
// write applies no items; write's error applies nothing.
func TestAdmit(t *testing.T) {
	ctx := context.Background()
	highest := func(context.Context, string) (fence.Token, error) { return 5, nil }
	var applied [][]string
	apply := func(_ context.Context, items []string) error { applied = append(applied, items); return nil }
	called := false
	err := Admit(ctx, "r", 4, highest, nil, func(context.Context) error { called = true; return nil }, apply, nil)
	if se := (*fence.StaleError)(nil); !errors.As(err, &se) || se.Highest != 5 || called || len(applied) != 0 {
		t.Fatalf("stale: %v (write called %v, applied %v)", err, called, applied)
	}
	if err := Admit(ctx, "r", 5, highest, nil, nil, apply, nil); err != nil || len(applied) != 1 || len(applied[0]) != 0 {
		t.Fatalf("nil write: %v, applied %v", err, applied)
	}
	boom := errors.New("boom")
	err = Admit(ctx, "r", 6, highest, nil, func(ctx context.Context) error { _, _ = Add(ctx, "a"); return boom }, apply, nil)
	if !errors.Is(err, boom) || len(applied) != 1 {
		t.Fatalf("failed write: %v, applied %v", err, applied)
	}
	if err := Admit(ctx, "r", 6, highest, nil, func(ctx context.Context) error { _, err := Add(ctx, "a"); return err }, apply, nil); err != nil || len(applied) != 2 || applied[1][0] != "a" {
		t.Fatalf("write: %v, applied %v", err, applied)
	}
}
