package fencebatch

import (
	"context"
	"errors"
	"testing"

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
