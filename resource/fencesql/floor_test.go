package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"github.com/zkrecipes/zkrecipes/testkit/fencetest"
)

// TestRaiseFloor: on PostgreSQL and SQLite, RaiseFloor sets a missing or
// lower fence row to the floor in one statement, after which every token
// below it is refused (its function not run) and the floor and above are
// accepted; it never lowers the row, and it refuses what Do refuses.
func TestRaiseFloor(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *sql.DB) {
		ctx := ctxT(t)
		f := newFence(t, db)
		if err := f.Do(ctx, "acct", 40, nil); err != nil {
			t.Fatal(err)
		}
		floor := fence.Era(1).Floor()
		for _, res := range []string{"acct", "never-written"} {
			if got, err := f.RaiseFloor(ctx, res, floor); err != nil || got != floor {
				t.Fatalf("RaiseFloor(%s) = %v, %v; want %v", res, got, err, floor)
			}
			if high, err := f.Highest(ctx, res); err != nil || high != floor {
				t.Fatalf("Highest(%s) = %v, %v after the floor", res, high, err)
			}
		}
		ran := false
		err := f.Do(ctx, "acct", 41, func(*sql.Tx) error { ran = true; return nil })
		if se := (*fence.StaleError)(nil); !errors.As(err, &se) || se.Highest != floor || ran {
			t.Fatalf("token 41 after the floor: %v (ran %v)", err, ran)
		}
		first, _ := fence.Era(1).Token(1)
		if err := f.Do(ctx, "acct", first, nil); err != nil {
			t.Fatalf("the new era's first token: %v", err)
		}
		if got, err := fencesql.RaiseFloor(ctx, db, "acct", floor); err != nil || got != first {
			t.Fatalf("a lower floor: %v, %v; want the row's %v kept", got, err, first)
		}
		if _, err := f.RaiseFloor(ctx, "acct", 1<<63); !errors.Is(err, fencesql.ErrTokenRange) {
			t.Fatalf("a floor over 2^63-1: %v", err)
		}
		if _, err := f.RaiseFloor(ctx, "acct", 0); !errors.Is(err, fence.ErrNoToken) {
			t.Fatalf("a zero floor: %v", err)
		}
	})
}

// TestFloorCeiling: fencetest's floors no era reaches, on PostgreSQL and
// SQLite, by RaiseFloor and by RaiseColumnFloor (which refuses them before
// any statement: the table does not even need to exist). Before, a floor
// of MaxToken was accepted, and locked the resource against every real
// grant.
func TestFloorCeiling(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *sql.DB) {
		f := newFence(t, db)
		fencetest.RunFloorCeiling(t, f.RaiseFloor, func(ctx context.Context, resource string, tok fence.Token) error {
			return f.Do(ctx, resource, tok, nil)
		})
		for _, fl := range []fence.Token{fence.MaxFloor + 1, fence.MaxToken} {
			var re *fence.RangeError
			if _, err := f.RaiseColumnFloor(ctxT(t), db, "no_such_table", "", fl); !errors.As(err, &re) || re.Floor != fl {
				t.Errorf("RaiseColumnFloor(%v): %v; want a *fence.RangeError", fl, err)
			}
		}
	})
}
