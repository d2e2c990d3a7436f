package fencesql_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
	"github.com/zkrecipes/zkrecipes/resource/fencesql/fencesqltest"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	_ "modernc.org/sqlite" // "sqlite"
)

func TestMain(m *testing.M) { serverkit.MainThen(m, pgtest.StopShared) }

// The helpers fencerace's concurrent runs share (fencesqltest, and
// pgtest's Schema: a fresh schema of the shared server per test, a CREATE
// DATABASE costing about a second and a schema nothing).
var (
	openPostgres = pgtest.Schema
	openSQLite   = fencesqltest.SQLite
	newFence     = fencesqltest.NewFence
	mustExec     = fencesqltest.Exec
	highest      = fencesqltest.Highest
)

// backend opens a fresh, empty database of one kind for a test.
type backend struct {
	name string
	open func(t *testing.T) *sql.DB
}

// backends are the databases every semantic test runs on: a throwaway
// PostgreSQL server (pgtest; PG_TEST_DSN for an existing one) and a SQLite
// file with modernc.org/sqlite's defaults (rollback journal, no busy
// timeout).
var backends = []backend{
	{"postgres", func(t *testing.T) *sql.DB { return openPostgres(t) }},
	{"sqlite", func(t *testing.T) *sql.DB { return openSQLite(t, "") }},
}

func openPostgresDSN(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() }) // before pgtest drops the database
	return db
}

func eachBackend(t *testing.T, test func(t *testing.T, db *sql.DB)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b.open(t)) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// count returns the number of rows of query.
func count(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(ctxT(t), "SELECT count(*) FROM ("+query+") q", args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
