package fenceetcd

import (
	"context"
	"errors"

	"github.com/zkrecipes/zkrecipes/fence"
)

// RaiseFloor makes floor the lowest token resource accepts from now on:
// its highest accepted token becomes max(highest, floor), in one
// transaction like Do's, so a later Do with a token below floor is refused
// with a *fence.StaleError. It returns the token now in effect and never
// lowers it; a zero floor changes nothing. It is the operator's step of a
// switch of lock backend (docs/backends.md#switching-backends). Errors are
// Do's, and a *fence.RangeError (fence.ErrTokenOverflow) for a floor above
// fence.MaxFloor, which no era reaches; after fence.ErrUncertain, call
// again.
func (f *Fence) RaiseFloor(ctx context.Context, resource string, floor fence.Token) (fence.Token, error) {
	if err := fence.CheckFloor(floor); err != nil {
		return 0, err
	}
	if floor.IsZero() {
		return f.Highest(ctx, resource)
	}
	_, err := f.do(ctx, resource, floor, nil)
	if se := (*fence.StaleError)(nil); errors.As(err, &se) {
		return se.Highest, nil // a larger token is there already
	}
	if err != nil {
		return 0, err
	}
	return floor, nil
}
