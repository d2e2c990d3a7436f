package fencerace_test

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
	_ "modernc.org/sqlite"             // "sqlite"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// The databases of the SQL runs, opened as resource/fencesql's own tests
// open them (its helpers_test.go).

func TestMain(m *testing.M) { zktest.MainThen(m, pgtest.StopShared) }

// pgBase is one database of the shared server for the whole test binary;
// each test gets a schema of its own in it, dropped when the test ends.
var pgBase struct {
	once sync.Once
	dsn  string
	err  error
	seq  atomic.Int64
}

// openPostgres opens a fresh schema of the shared PostgreSQL server
// (pgtest; PG_TEST_DSN for an existing one).
func openPostgres(t *testing.T) *sql.DB {
	t.Helper()
	srv := pgtest.Shared(t)
	pgBase.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pgBase.dsn, pgBase.err = srv.NewDatabase(ctx, "fencerace")
	})
	if pgBase.err != nil {
		t.Fatalf("pgtest: %v", pgBase.err)
	}
	schema := fmt.Sprintf("t%d", pgBase.seq.Add(1))
	admin := openDB(t, "pgx", pgBase.dsn)
	mustExec(t, admin, "CREATE SCHEMA "+schema)
	t.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	return openDB(t, "pgx", pgBase.dsn+"&search_path="+schema) // pgx sends it as a run-time parameter
}

// openSQLite opens a new SQLite file with the DSN parameters query.
func openSQLite(t *testing.T, query string) *sql.DB {
	t.Helper()
	dsn := filepath.Join(t.TempDir(), "test.db")
	if query != "" {
		dsn += "?" + query
	}
	return openDB(t, "sqlite", dsn)
}

func openDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() }) // before pgtest drops the database
	return db
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

func highest(t *testing.T, f *fencesql.Fence, resource string) fence.Token {
	t.Helper()
	h, err := f.Highest(ctxT(t), resource)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
