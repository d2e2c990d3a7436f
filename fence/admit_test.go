package fence

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestGuardAdmit: Guard.Admit is Do with a context: stale refused without
// calling write, write's error and a done ctx record nothing, a nil write
// only records.
func TestGuardAdmit(t *testing.T) {
	var g Guard
	ctx := context.Background()
	if err := g.Admit(ctx, "r", 5, nil); err != nil || g.Highest("r") != 5 {
		t.Fatalf("nil write: %v, highest %v", err, g.Highest("r"))
	}
	called := false
	err := g.Admit(ctx, "r", 4, func(context.Context) error { called = true; return nil })
	var se *StaleError
	if !errors.As(err, &se) || se.Highest != 5 || called {
		t.Fatalf("stale: %v, called %v", err, called)
	}
	boom := errors.New("boom")
	if err := g.Admit(ctx, "r", 6, func(context.Context) error { return boom }); err != boom || g.Highest("r") != 5 {
		t.Fatalf("write error: %v, highest %v", err, g.Highest("r"))
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := g.Admit(done, "r", 7, nil); !errors.Is(err, context.Canceled) || g.Highest("r") != 5 {
		t.Fatalf("done ctx: %v, highest %v", err, g.Highest("r"))
	}
	type key struct{}
	vctx := context.WithValue(ctx, key{}, "v")
	if err := g.Admit(vctx, "r", 7, func(c context.Context) error {
		if c.Value(key{}) != "v" {
			t.Error("write did not get ctx")
		}
		return nil
	}); err != nil || g.Highest("r") != 7 {
		t.Fatal(err)
	}
	if err := g.Admit(ctx, "r", 0, nil); !errors.Is(err, ErrNoToken) {
		t.Fatal(err)
	}
	if err := g.Admit(ctx, "r", MaxToken+1, nil); !errors.Is(err, ErrTokenOverflow) {
		t.Fatal(err)
	}
}

func TestCheckResource(t *testing.T) {
	for _, ok := range []string{"a", "accounts/42", strings.Repeat("é", 100), "with space"} {
		if err := CheckResource(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("a", 201), "a\xff", "a\x00"} {
		err := CheckResource(bad)
		if !errors.Is(err, ErrBadResource) || (len(bad) > 3 && strings.Contains(err.Error(), bad)) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
