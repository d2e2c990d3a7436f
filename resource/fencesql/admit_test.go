package fencesql_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
)

// TestAdmit: a *Fence as a fence.Fence. write finds the transaction with
// TxFrom and its statements commit with the token; a stale token is
// refused before write runs; write's error rolls everything back; a bad
// name matches fence.ErrBadResource too.
func TestAdmit(t *testing.T) {
	db := openSQLite(t, "")
	f := newFence(t, db)
	mustExec(t, db, "CREATE TABLE data (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
	ctx := ctxT(t)
	if err := f.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	insert := func(v string, fail error) func(context.Context) error {
		return func(ctx context.Context) error {
			tx, ok := fencesql.TxFrom(ctx)
			if !ok {
				return errors.New("no transaction")
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO data (k, v) VALUES (?, ?)", v, v); err != nil {
				return err
			}
			return fail
		}
	}
	if err := f.Admit(ctx, "r", 10, insert("by 10", nil)); err != nil {
		t.Fatal(err)
	}
	called := false
	err := f.Admit(ctx, "r", 9, func(context.Context) error { called = true; return nil })
	if !errors.Is(err, fence.ErrStale) || called {
		t.Fatalf("stale: %v, called %v", err, called)
	}
	boom := errors.New("boom")
	if err := f.Admit(ctx, "r", 11, insert("by 11", boom)); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if err := f.Admit(ctx, "r", 12, nil); err != nil {
		t.Fatal(err)
	}
	if highest(t, f, "r") != 12 || count(t, db, "SELECT * FROM data") != 1 {
		t.Fatalf("highest %v, rows %d: want 12 and only the row of 10", highest(t, f, "r"), count(t, db, "SELECT * FROM data"))
	}
	if err := f.Admit(ctx, "", 5, nil); !errors.Is(err, fence.ErrBadResource) || !errors.Is(err, fencesql.ErrBadResource) {
		t.Fatal(err)
	}
}
