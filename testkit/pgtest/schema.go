package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// scratch is the Shared server's database that Schema's schemas live in,
// made by the first Schema on that server and dropped by StopShared.
var scratch struct {
	mu  sync.Mutex
	srv *Server
	dsn string
	seq atomic.Int64
}

// Schema opens, for the test, a fresh and empty schema on the Shared server
// and returns a handle (driver "pgx") with it on the search path; the schema
// is dropped, and the handle closed, at the test's cleanup. A schema costs
// nothing where a CREATE DATABASE costs about a second, so the test
// binary's schemas live in one database, made on first use and dropped by
// StopShared. It fails the test when the server or the schema cannot be
// had.
func Schema(tb testing.TB) *sql.DB {
	tb.Helper()
	base, err := scratchDatabase(Shared(tb))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	schema := fmt.Sprintf("t%d", scratch.seq.Add(1))
	admin := open(tb, base)
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("pgtest: CREATE SCHEMA %s: %v", schema, err)
	}
	tb.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	return open(tb, base+"&search_path="+schema) // pgx sends it as a run-time parameter
}

// scratchDatabase returns the DSN of srv's scratch database, made (and
// listed for StopShared to drop) on first use.
func scratchDatabase(srv *Server) (string, error) {
	scratch.mu.Lock()
	defer scratch.mu.Unlock()
	if scratch.srv == srv {
		return scratch.dsn, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	dsn, err := srv.NewDatabase(ctx, "schemas")
	if err != nil {
		return "", err
	}
	examples.mu.Lock()
	examples.dsns = append(examples.dsns, dsn)
	examples.mu.Unlock()
	scratch.srv, scratch.dsn = srv, dsn
	return dsn, nil
}

// open opens dsn with the pgx driver, closed at the test's cleanup (before
// StopShared drops the database).
func open(tb testing.TB, dsn string) *sql.DB {
	tb.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}
