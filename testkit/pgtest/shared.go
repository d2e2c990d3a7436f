package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit/rtest/lazy"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

var dbSeq atomic.Int64

// NewDatabase creates an empty database with a fresh name that starts with
// prefix and returns its DSN; the caller drops it with DropDatabase. Names
// are lowercased and reduced to letters, digits and underscores.
func (s *Server) NewDatabase(ctx context.Context, prefix string) (string, error) {
	name := fmt.Sprintf("%s_%d_%d", sanitize(prefix), os.Getpid(), dbSeq.Add(1))
	db, err := sql.Open("pgx", s.admin)
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return withDatabase(s.admin, name)
}

// DropDatabase drops the database of dsn (one NewDatabase returned),
// ending its remaining connections first.
func (s *Server) DropDatabase(ctx context.Context, dsn string) error {
	name, err := databaseOf(dsn)
	if err != nil {
		return err
	}
	db, err := sql.Open("pgx", s.admin)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	return err
}

// Database creates an empty database for the test, named after it, and
// returns its DSN; it is dropped at the test's cleanup. It is how tests
// that share a server (Shared) keep apart. It fails the test when the
// database cannot be created.
func (s *Server) Database(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	dsn, err := s.NewDatabase(ctx, tb.Name())
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		defer cancel()
		if err := s.DropDatabase(ctx, dsn); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return dsn
}

var shared lazy.Shared[*Server]

// examples are the databases ExampleDSN handed out and Schema's scratch
// database, dropped by StopShared.
var examples struct {
	mu   sync.Mutex
	dsns []string
}

// Shared returns the test binary's shared server, launched on first use and
// stopped by Main (or StopShared). Tests that share it keep to databases of
// their own (Database) and must not Restart it. When no server can be had
// the test fails at once with InstallHint, and later calls fail the same
// way without retrying.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	return shared.Get(tb, "pgtest.Shared", launchShared)
}

func launchShared() (*Server, error) { return Launch(context.Background()) }

func sharedServer() (*Server, error) { return shared.Load(launchShared) }

// ExampleDSN is for runnable Example functions, which have no testing.TB:
// it returns the DSN of a new database on the shared server, dropped by
// StopShared. It panics with the install hint when no server can be started
// (an example must not pass without a server).
func ExampleDSN() string {
	srv, err := sharedServer()
	if err != nil {
		panic(fmt.Sprintf("pgtest.ExampleDSN: %v", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	dsn, err := srv.NewDatabase(ctx, "example")
	if err != nil {
		panic(fmt.Sprintf("pgtest.ExampleDSN: %v", err))
	}
	examples.mu.Lock()
	examples.dsns = append(examples.dsns, dsn)
	examples.mu.Unlock()
	return dsn
}

// Main is for TestMain: func TestMain(m *testing.M) { pgtest.Main(m) }. It
// runs the tests with serverkit.MainThen (child processes stopped, goroutines
// checked with goleak) and StopShared after them. A test binary that also
// uses other harnesses' shared servers calls serverkit.MainThen itself, with
// each harness's StopShared in its cleanup.
func Main(m *testing.M) { serverkit.MainThen(m, StopShared) }

// StopShared drops the databases of ExampleDSN and Schema and stops the
// shared server, if one was started; a later Shared launches a new one.
func StopShared() {
	examples.mu.Lock()
	defer examples.mu.Unlock()
	shared.StopOrWarn(func(srv *Server) {
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		defer cancel()
		for _, dsn := range examples.dsns {
			srv.DropDatabase(ctx, dsn)
		}
	}, "pgtest: stopping the shared server")
	examples.dsns = nil
	stopSharedTLS()
}
