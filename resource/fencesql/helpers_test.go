package fencesql_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	_ "modernc.org/sqlite" // "sqlite"
)

func TestMain(m *testing.M) { serverkit.MainThen(m, pgtest.StopShared) }

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
	{"postgres", openPostgres},
	{"sqlite", func(t *testing.T) *sql.DB { return openSQLite(t, "") }},
}

// pgBase is one database of the shared server for the whole test binary;
// each test gets a schema of its own in it (a CREATE DATABASE costs about a
// second, a schema nothing), dropped when the test ends.
var pgBase struct {
	once sync.Once
	dsn  string
	err  error
	seq  atomic.Int64
}

func openPostgres(t *testing.T) *sql.DB {
	t.Helper()
	srv := pgtest.Shared(t)
	pgBase.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pgBase.dsn, pgBase.err = srv.NewDatabase(ctx, "fencesql")
	})
	if pgBase.err != nil {
		t.Fatalf("pgtest: %v", pgBase.err)
	}
	schema := fmt.Sprintf("t%d", pgBase.seq.Add(1))
	admin := openPostgresDSN(t, pgBase.dsn)
	mustExec(t, admin, "CREATE SCHEMA "+schema)
	t.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	return openPostgresDSN(t, pgBase.dsn+"&search_path="+schema) // pgx sends it as a run-time parameter
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

// openSQLite opens a new SQLite file with the DSN parameters query (e.g.
// "_pragma=journal_mode(WAL)").
func openSQLite(t *testing.T, query string) *sql.DB {
	t.Helper()
	dsn := filepath.Join(t.TempDir(), "test.db")
	if query != "" {
		dsn += "?" + query
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
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

// newFence returns a Fence on db with its table created.
func newFence(t *testing.T, db *sql.DB, opts ...fencesql.Option) *fencesql.Fence {
	t.Helper()
	f, err := fencesql.New(db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return f
}

func mustExec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.ExecContext(ctxT(t), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
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
