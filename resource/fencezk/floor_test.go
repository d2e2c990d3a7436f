package fencezk_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencezk"
	"github.com/zkrecipes/zkrecipes/testkit/fencetest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestRaiseFloor: RaiseFloor sets a register's token to the floor and keeps
// its value (creating a missing register, parents too, empty), after which
// a lower token is refused and the floor and above are accepted; it never
// lowers the token.
func TestRaiseFloor(t *testing.T) {
	s := connect(t, zktest.Shared(t))
	ctx := context.Background()
	r := newRegister(t, s, "/floor/report")
	if _, err := r.Write(ctx, 40, []byte("v40")); err != nil {
		t.Fatal(err)
	}
	floor := fence.Era(2).Floor()
	if got, err := r.RaiseFloor(ctx, floor); err != nil || got != floor {
		t.Fatalf("RaiseFloor = %v, %v; want %v", got, err, floor)
	}
	if v, err := r.Read(ctx); err != nil || v.Token != floor || string(v.Data) != "v40" {
		t.Fatalf("after the floor: %+v, %v; want the token %v and the value kept", v, err, floor)
	}
	if _, err := r.Write(ctx, 41, []byte("late")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("token 41 after the floor: %v", err)
	}
	first, _ := fence.Era(2).Token(7)
	if _, err := r.Write(ctx, first, []byte("new")); err != nil {
		t.Fatalf("the new era's token: %v", err)
	}
	if got, err := r.RaiseFloor(ctx, floor); err != nil || got != first {
		t.Fatalf("a lower floor: %v, %v; want %v kept", got, err, first)
	}
	fresh := newRegister(t, s, "/floor/missing/reg")
	if got, err := fresh.RaiseFloor(ctx, floor); err != nil || got != floor {
		t.Fatalf("RaiseFloor of a missing register: %v, %v", got, err)
	}
	if v, err := fresh.Read(ctx); err != nil || v.Token != floor || len(v.Data) != 0 {
		t.Fatalf("the created register: %+v, %v", v, err)
	}
	// Above fence.MaxToken, a floor or a write is refused (as Guard and
	// fencesql refuse it), the register unchanged; MaxToken itself is fine.
	for _, tok := range []fence.Token{fence.MaxToken + 1, math.MaxUint64} {
		var re *fence.RangeError
		if _, err := fresh.RaiseFloor(ctx, tok); !errors.As(err, &re) || re.Token != tok {
			t.Errorf("RaiseFloor(%v): %v; want a *fence.RangeError", tok, err)
		}
		if _, err := fresh.Write(ctx, tok, []byte("x")); !errors.Is(err, fence.ErrTokenOverflow) {
			t.Errorf("Write(%v): %v; want fence.ErrTokenOverflow", tok, err)
		}
	}
	if v, err := fresh.Read(ctx); err != nil || v.Token != floor {
		t.Fatalf("after the refused tokens: %+v, %v; want %v kept", v, err, floor)
	}
	if got, err := fresh.RaiseFloor(ctx, fence.MaxFloor); err != nil || got != fence.MaxFloor {
		t.Fatalf("RaiseFloor(MaxFloor) = %v, %v", got, err)
	}
}

// TestFloorCeiling: fencetest's floors no era reaches, on a register.
// Before, a floor of MaxToken was accepted, and locked the register
// against every real grant.
func TestFloorCeiling(t *testing.T) {
	s := connect(t, zktest.Shared(t))
	regs := map[string]*fencezk.Register{}
	reg := func(resource string) *fencezk.Register {
		if regs[resource] == nil {
			regs[resource] = newRegister(t, s, "/floor/ceiling/"+resource)
		}
		return regs[resource]
	}
	fencetest.RunFloorCeiling(t, func(ctx context.Context, resource string, floor fence.Token) (fence.Token, error) {
		return reg(resource).RaiseFloor(ctx, floor)
	}, func(ctx context.Context, resource string, tok fence.Token) error {
		_, err := reg(resource).Write(ctx, tok, []byte("v"))
		return err
	})
}
