package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence/fencesql"
)

// TestSQLiteWriteOutsideTx: on SQLite a Do's transaction holds the
// database's write lock from its fence statement to its commit, so a write
// that fn makes outside tx (on the *sql.DB, or a nested Do on any
// resource) waits on its own transaction. The errors say so instead of
// blaming a concurrent transaction, and nothing is committed.
func TestSQLiteWriteOutsideTx(t *testing.T) {
	db := openSQLite(t, "")
	f := newFence(t, db, fencesql.WithBusyTimeout(200*time.Millisecond))
	mustExec(t, db, "CREATE TABLE data (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
	ctx := ctxT(t)

	err := f.Do(ctx, "outer", 5, func(tx *sql.Tx) error {
		_, err := db.ExecContext(ctx, "INSERT INTO data (k, v) VALUES ('a', 'outside tx')")
		return err
	})
	if !errors.Is(err, fencesql.ErrConflict) || !strings.Contains(err.Error(), "waits on itself") {
		t.Fatalf("a write on the *sql.DB inside fn: %v", err)
	}
	t.Log(err)

	inner, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err = f.Do(ctx, "outer", 5, func(tx *sql.Tx) error { return f.Do(inner, "inner", 5, nil) })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waits on itself") {
		t.Fatalf("a nested Do: %v", err)
	}
	t.Log(err)
	if highest(t, f, "outer") != 0 || highest(t, f, "inner") != 0 || count(t, db, "SELECT * FROM data") != 0 {
		t.Fatal("something was committed")
	}
}
