package fencezk

import (
	"context"
	"errors"

	"github.com/zkrecipes/zkrecipes/fence"
)

// RaiseFloor makes floor the lowest token the register accepts from now on:
// its token becomes max(token, floor) and its value stays, by Write's
// versioned compare-and-set (created empty if missing, checked as Write
// checks it), so every later Write or Apply with a token below floor is
// refused with a *fence.StaleError. It returns the token now stored; it
// never lowers it. It is the operator's step of a switch of lock backend:
// raise every fence to the new era's Floor (docs/backends.md#switching-backends).
// Errors: Write's, and a *fence.RangeError (fence.ErrTokenOverflow) for a
// floor above fence.MaxFloor (fence.CheckFloor); after one matching
// fence.ErrUncertain, Read the register or call again.
func (r *Register) RaiseFloor(ctx context.Context, floor fence.Token) (fence.Token, error) {
	if err := fence.CheckFloor(floor); err != nil {
		return 0, err
	}
	// An empty, non-nil ops: write keeps the value, and sends the
	// register's setData (or create) alone in a multi.
	_, _, err := r.write(ctx, floor, nil, []any{})
	if se := (*fence.StaleError)(nil); errors.As(err, &se) {
		return se.Highest, nil // a larger token is there already: nothing to do
	}
	if err != nil {
		return 0, err
	}
	return floor, nil
}
