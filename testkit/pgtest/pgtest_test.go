package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

// TestSharedDatabases: Shared is one server; two tests' databases on it are
// separate, and each answers.
func TestSharedDatabases(t *testing.T) {
	ctx := context.Background()
	s1, s2 := Shared(t), Shared(t)
	if s1 != s2 {
		t.Fatal("two Shared calls returned two servers")
	}
	a, b := s1.Database(t), s2.Database(t)
	if a == b {
		t.Fatalf("two Database calls returned one database: %s", a)
	}
	for _, dsn := range []string{a, b} {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "CREATE TABLE t (x int)"); err != nil {
			t.Errorf("%s: %v", dsn, err)
		}
		db.Close()
	}
}

// TestSanitize: database names are plain identifiers.
func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{"TestX/sub-1": "testx_sub_1", "9a": "t9a", "": "t"} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRestart: a crash restart keeps what was committed (with
// synchronous_commit on, as the lock backends set it) and the server answers
// on the same address afterwards.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	srv := Start(t)
	db, err := sql.Open("pgx", srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (x int); SET synchronous_commit = on; INSERT INTO t VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	for _, crash := range []bool{true, false} {
		if err := srv.Restart(ctx, crash); err != nil {
			t.Fatalf("Restart(crash=%v): %v", crash, err)
		}
		var x int
		if err := db.QueryRowContext(ctx, "SELECT x FROM t").Scan(&x); err != nil || x != 7 {
			t.Fatalf("after Restart(crash=%v): x = %d, %v; want 7", crash, x, err)
		}
	}
}

// TestLaunchUnreachable: a PG_TEST_DSN that nothing answers is no server:
// the error wraps ErrNoServer, names the variable, holds the install hint
// and not the password.
func TestLaunchUnreachable(t *testing.T) {
	t.Setenv(EnvDSN, "postgres://me:secret@127.0.0.1:1/postgres?sslmode=disable")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	srv, err := Launch(ctx)
	if err == nil {
		srv.Close()
		t.Fatal("Launch on an unreachable PG_TEST_DSN succeeded")
	}
	msg := err.Error()
	if !errors.Is(err, ErrNoServer) || !strings.Contains(msg, EnvDSN) || !strings.Contains(msg, InstallHint) || strings.Contains(msg, "secret") {
		t.Errorf("Launch: %v; want ErrNoServer naming %s with the install hint, no password", err, EnvDSN)
	}
}

// TestBouncer: a PgBouncer in session mode passes queries through to the
// database of the DSN it was given, and Close stops it (idempotently).
func TestBouncer(t *testing.T) {
	ctx := context.Background()
	dsn := Shared(t).Database(t)
	b, err := LaunchBouncer(ctx, dsn, "session")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", b.DSN())
	if err != nil {
		t.Fatal(err)
	}
	var name string
	if err := db.QueryRowContext(ctx, "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if want, _ := databaseOf(dsn); name != want {
		t.Errorf("through PgBouncer: current_database() = %q, want %q", name, want)
	}
	db.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	select {
	case <-b.exit:
	default:
		t.Error("PgBouncer still runs after Close")
	}
}

// TestLaunchInterrupted: a cancelled ctx is not a missing install: Launch's
// error wraps context.Canceled and its cause, not ErrNoServer.
func TestLaunchInterrupted(t *testing.T) {
	t.Setenv(EnvDSN, "")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupt signal received"))
	_, err := Launch(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), "interrupt signal received") {
		t.Fatalf("Launch with a cancelled ctx: %v, want context.Canceled with its cause, not ErrNoServer", err)
	}
}
