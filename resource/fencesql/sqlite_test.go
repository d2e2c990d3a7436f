package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/resource/fencesql"
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

// TestSQLiteUpdateInOwnTx is the advice of docs/fencing.md for Update in
// the caller's own transaction on SQLite, whose connection Update leaves
// alone: with a busy timeout and _txlock=immediate in the DSN, writers
// whose transactions read before they write all get through, waiting for
// each other instead of failing with SQLITE_BUSY.
func TestSQLiteUpdateInOwnTx(t *testing.T) {
	db := openSQLite(t, "_pragma=busy_timeout(5000)&_txlock=immediate")
	f := newFence(t, db)
	mustExec(t, db, "CREATE TABLE acct (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, fence INTEGER NOT NULL DEFAULT 0)",
		"INSERT INTO acct (id, n) VALUES (1, 0)")
	ctx := ctxT(t)
	row := fencesql.Row{Table: "acct", Key: "id", ID: 1}
	const writers, each = 8, 10
	errs := make(chan error, writers*each)
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				errs <- func() error {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					defer tx.Rollback()
					var n int
					if err := tx.QueryRowContext(ctx, "SELECT n FROM acct WHERE id = 1").Scan(&n); err != nil {
						return err
					}
					if err := f.Update(ctx, tx, 5, row, "n = ?", n+1); err != nil {
						return err
					}
					return tx.Commit()
				}()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if count(t, db, "SELECT * FROM acct WHERE n = ?", writers*each) != 1 {
		t.Fatal("lost updates: the transactions did not run one at a time")
	}
}
