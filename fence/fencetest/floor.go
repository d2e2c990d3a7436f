package fencetest

import (
	"context"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
)

// RunRaiseFloor: the mark goes up to the floor, a lower token is refused
// after it, the new era's tokens pass, and a lower floor or a zero one
// changes nothing; a floor above MaxToken is refused. do is a fenced call
// with no writes; raise is the backend's RaiseFloor.
func RunRaiseFloor(t *testing.T, do func(ctx context.Context, resource string, t fence.Token) error,
	raise func(ctx context.Context, resource string, floor fence.Token) (fence.Token, error)) {
	t.Helper()
	ctx := context.Background()
	floor := fence.Era(2).Floor()
	if got, err := raise(ctx, "new", floor); got != floor || err != nil {
		t.Fatalf("floor of a new resource: %v, %v", got, err)
	}
	if err := do(ctx, "r", 40); err != nil {
		t.Fatal(err)
	}
	if got, err := raise(ctx, "r", floor); got != floor || err != nil {
		t.Fatalf("RaiseFloor = %v, %v", got, err)
	}
	if err := do(ctx, "r", 41); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("token 41 after the floor: %v", err)
	}
	first, _ := fence.Era(2).Token(7)
	if err := do(ctx, "r", first); err != nil {
		t.Fatal(err)
	}
	for _, fl := range []fence.Token{floor, 0} {
		if got, err := raise(ctx, "r", fl); got != first || err != nil {
			t.Fatalf("floor %v: %v, %v; want %v kept", fl, got, err, first)
		}
	}
	if _, err := raise(ctx, "r", fence.MaxToken+1); !errors.Is(err, fence.ErrTokenOverflow) {
		t.Fatalf("floor above MaxToken: %v", err)
	}
}
