package fencetest

import (
	"context"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
)

// RunRaiseFloor: the mark goes up to the floor, a lower token is refused
// after it, the new era's tokens pass, and a lower floor or a zero one
// changes nothing; a floor above MaxToken is refused (RunFloorCeiling
// checks the rest of the ceiling). do is a fenced call with no writes;
// raise is the backend's RaiseFloor.
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

// RunFloorCeiling: every fence refuses a floor no era reaches, above
// fence.MaxFloor (the last era's floor) up to MaxToken and past it, with a
// *fence.RangeError matching fence.ErrTokenOverflow, before it looks at
// the resource; MaxFloor itself is accepted, and the grants of the last
// era pass it. raise is the backend's RaiseFloor on the resource named
// (or on a register of its own for it); write is a fenced write of t to
// it.
func RunFloorCeiling(t *testing.T, raise func(ctx context.Context, resource string, floor fence.Token) (fence.Token, error),
	write func(ctx context.Context, resource string, t fence.Token) error) {
	t.Helper()
	ctx := context.Background()
	for _, fl := range []fence.Token{fence.MaxFloor + 1, fence.MaxToken - 1, fence.MaxToken, fence.MaxToken + 1} {
		var re *fence.RangeError
		got, err := raise(ctx, "ceiling", fl)
		if !errors.Is(err, fence.ErrTokenOverflow) || !errors.As(err, &re) || got != 0 {
			t.Errorf("floor %v: %v, %v; want a *fence.RangeError matching ErrTokenOverflow", fl, got, err)
		}
	}
	if err := write(ctx, "ceiling", 5); err != nil {
		t.Fatalf("a write after the refused floors: %v", err)
	}
	if got, err := raise(ctx, "ceiling", fence.MaxFloor); got != fence.MaxFloor || err != nil {
		t.Fatalf("floor MaxFloor: %v, %v", got, err)
	}
	if err := write(ctx, "ceiling", 9); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("an older era's token after MaxFloor: %v", err)
	}
	first, _ := fence.MaxEra.Token(1)
	if err := write(ctx, "ceiling", first); err != nil {
		t.Fatalf("the last era's first token after its floor: %v", err)
	}
}

// PerResource returns a function that gives, for each resource name, the
// value mk made for it on first use (a register per resource, say), and
// fails the test if mk fails.
func PerResource[T any](t *testing.T, mk func(resource string) (T, error)) func(resource string) T {
	made := map[string]T{}
	return func(resource string) T {
		v, ok := made[resource]
		if !ok {
			var err error
			if v, err = mk(resource); err != nil {
				t.Fatal(err)
			}
			made[resource] = v
		}
		return v
	}
}
