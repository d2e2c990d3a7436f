package pgtest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.MainThen(m, StopShared) }

// TestSharedDatabases: two tests' databases are separate, and each answers.
func TestSharedDatabases(t *testing.T) {
	ctx := context.Background()
	a, b := Shared(t), Shared(t)
	if a == b {
		t.Fatalf("two Shared calls returned one database: %s", a)
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
	srv, err := Start(ctx)
	if err != nil {
		t.Fatalf("%v (%s)", err, InstallHint)
	}
	defer srv.Close()
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
