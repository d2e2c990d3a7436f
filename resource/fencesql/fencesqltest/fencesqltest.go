// Package fencesqltest holds the helpers of fencesql's tests that the
// concurrency proof (testkit/nemesis/fencerace) runs on too: a SQLite file
// per test, a Fence with its table, statements run for a test's set-up, and
// a resource's highest token. A PostgreSQL schema per test comes from
// testkit/pgtest's Schema. Every helper fails the test on an error.
package fencesqltest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite" // "sqlite"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
)

// SQLite opens a new SQLite file (modernc.org/sqlite) in the test's
// temporary directory, with the DSN parameters query (say
// "_pragma=journal_mode(WAL)"; "" for the driver's defaults). The handle
// is closed at the test's cleanup.
func SQLite(tb testing.TB, query string) *sql.DB {
	tb.Helper()
	dsn := filepath.Join(tb.TempDir(), "test.db")
	if query != "" {
		dsn += "?" + query
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// NewFence returns a Fence on db with its table created.
func NewFence(tb testing.TB, db *sql.DB, opts ...fencesql.Option) *fencesql.Fence {
	tb.Helper()
	f, err := fencesql.New(db, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	if err := f.CreateTable(ctx(tb)); err != nil {
		tb.Fatal(err)
	}
	return f
}

// Exec runs each statement on db, and fails the test with the first one
// that fails.
func Exec(tb testing.TB, db *sql.DB, stmts ...string) {
	tb.Helper()
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx(tb), s); err != nil {
			tb.Fatalf("%s: %v", s, err)
		}
	}
}

// Highest returns f's highest accepted token for resource.
func Highest(tb testing.TB, f *fencesql.Fence, resource string) fence.Token {
	tb.Helper()
	h, err := f.Highest(ctx(tb), resource)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// ctx bounds one call of a helper: a minute, cancelled at the test's
// cleanup at the latest.
func ctx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	tb.Cleanup(cancel)
	return c
}
