package fencesql

import (
	"context"
	"database/sql"
	"errors"

	"github.com/zkrecipes/zkrecipes/fence"
)

// RaiseFloor makes floor the lowest token resource's fence row accepts from
// now on, in one statement (Do's fence statement, with no function): the
// row's token becomes max(token, floor), inserted if missing, so every
// later Do with a token below floor is refused. It returns the token now in
// the row and never lowers it. It is the operator's step of a switch of
// lock backend (docs/backends.md#switching-backends). Errors are Do's, and
// a *fence.RangeError (fence.ErrTokenOverflow) for a floor above
// fence.MaxFloor, which no era reaches; after one matching
// fence.ErrUncertain, read the row (Highest) or call again.
func (f *Fence) RaiseFloor(ctx context.Context, resource string, floor fence.Token) (fence.Token, error) {
	if err := checkFloor(floor); err != nil {
		return 0, err
	}
	err := f.do(ctx, resource, floor, nil)
	if se := (*fence.StaleError)(nil); errors.As(err, &se) {
		return se.Highest, nil // a larger token is there already: nothing to do
	}
	if err != nil {
		return 0, err
	}
	return floor, nil
}

// RaiseFloor is New(db, opts...) followed by RaiseFloor: see
// [Fence.RaiseFloor].
func RaiseFloor(ctx context.Context, db *sql.DB, resource string, floor fence.Token, opts ...Option) (fence.Token, error) {
	f, err := New(db, opts...)
	if err != nil {
		return 0, err
	}
	return f.RaiseFloor(ctx, resource, floor)
}
