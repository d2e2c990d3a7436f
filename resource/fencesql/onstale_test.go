package fencesql_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"github.com/zkrecipes/zkrecipes/testkit/fencetest"
)

// TestOnStale: a write Do, Admit or Update refuses for a stale token is
// reported to OnStale once; accepted writes, bad input and a floor below
// the token are not.
func TestOnStale(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *sql.DB) {
		ctx := ctxT(t)
		f := newFence(t, db)
		onStale, reported := fencetest.CountStale()
		f.OnStale = onStale
		if err := f.Do(ctx, "s", 5, nil); err != nil {
			t.Fatal(err)
		}
		if err := f.Do(ctx, "s", 4, nil); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("stale Do: %v", err)
		}
		if err := f.Admit(ctx, "s", 4, nil); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("stale Admit: %v", err)
		}
		if err := f.Do(ctx, "", 4, nil); err == nil {
			t.Fatal("Do of an empty resource accepted")
		}
		if _, err := f.RaiseFloor(ctx, "s", 3); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, "CREATE TABLE onstale (id INTEGER PRIMARY KEY, v BIGINT NOT NULL, fence BIGINT)",
			"INSERT INTO onstale (id, v, fence) VALUES (1, 0, 0)")
		row := fencesql.Row{Table: "onstale", Key: "id", ID: 1}
		set := "v = " + f.Dialect().Placeholder(1)
		if err := f.Update(ctx, db, 5, row, set, 1); err != nil {
			t.Fatal(err)
		}
		if err := f.Update(ctx, db, 4, row, set, 2); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("stale Update: %v", err)
		}
		if n := reported(); n != 3 {
			t.Fatalf("the fence reported %d stale writes, want 3", n)
		}
	})
}

// TestOnStaleNotForTheWritesRefusals: a Do whose fn is refused by another
// fenced write (an Update with a stale token) reports that one refusal
// once: Update's, not Do's too.
func TestOnStaleNotForTheWritesRefusals(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *sql.DB) {
		ctx := ctxT(t)
		f := newFence(t, db)
		onStale, reported := fencetest.CountStale()
		f.OnStale = onStale
		mustExec(t, db, "CREATE TABLE nested (id INTEGER PRIMARY KEY, v BIGINT NOT NULL, fence BIGINT)",
			"INSERT INTO nested (id, v, fence) VALUES (1, 0, 9)")
		row := fencesql.Row{Table: "nested", Key: "id", ID: 1}
		set := "v = " + f.Dialect().Placeholder(1)
		err := f.Do(ctx, "s", 5, func(tx *sql.Tx) error { return f.Update(ctx, tx, 5, row, set, 1) })
		if !errors.Is(err, fence.ErrStale) {
			t.Fatalf("Do = %v", err)
		}
		if n := reported(); n != 1 {
			t.Fatalf("one refusal reported %d times", n)
		}
	})
}
