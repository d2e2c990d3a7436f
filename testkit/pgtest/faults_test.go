package pgtest

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"
)

// TestTerminate: Terminate ends the sessions of one application_name, and
// only those; the advisory lock such a session held is free when it
// returns.
func TestTerminate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := Shared(t)
	dsn := srv.Database(t)
	open := func(app string) *sql.Conn {
		db, err := sql.Open("pgx", dsn+"&application_name="+app)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	victim, other := open("pgtest-victim"), open("pgtest-bystander")
	if _, err := victim.ExecContext(ctx, "SELECT pg_advisory_lock(42)"); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := victim.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	ended, err := srv.Terminate(ctx, "pgtest-victim", 5*time.Second)
	if err != nil || !slices.Equal(ended, []int{pid}) {
		t.Fatalf("Terminate = %v, %v; want [%d]", ended, err, pid)
	}
	var free bool
	if err := other.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(42)").Scan(&free); err != nil || !free {
		t.Errorf("the lock of the terminated session: free %v, %v; want free", free, err)
	}
	if err := victim.PingContext(ctx); err == nil {
		t.Error("the terminated session still answers")
	}
	if left, err := srv.Sessions(ctx, "pgtest-victim"); err != nil || len(left) != 0 {
		t.Errorf("Sessions after Terminate = %v, %v; want none", left, err)
	}
	if again, err := srv.Terminate(ctx, "pgtest-victim", time.Second); err != nil || len(again) != 0 {
		t.Errorf("Terminate of nothing = %v, %v", again, err)
	}
}

// TestPauseRestart: Pause freezes the postmaster and every backend (an open
// session does not answer, nor does a new connection), Resume thaws them;
// RestartAfter keeps the server down for the time asked, whatever the kind
// of shutdown, and resumes a paused server first.
func TestPauseRestart(t *testing.T) {
	srv := Start(t)
	ctx := context.Background()
	db, err := sql.Open("pgx", srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := c.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	if p := srv.Paused(); len(p) < 3 || p[0] != srv.cmd.Process.Pid || !slices.Contains(p, pid) {
		t.Errorf("Paused() = %v; want the postmaster %d first, the backend %d and the auxiliary processes", p, srv.cmd.Process.Pid, pid)
	}
	frozen := func(what string, f func(context.Context) error) {
		t.Helper()
		qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := f(qctx); err == nil {
			t.Errorf("%s answered while the server was paused", what)
		}
	}
	frozen("an open session", func(ctx context.Context) error { return c.PingContext(ctx) })
	frozen("a new connection", func(ctx context.Context) error {
		n, err := sql.Open("pgx", srv.DSN())
		if err == nil {
			err = n.PingContext(ctx)
			n.Close()
		}
		return err
	})
	c.Close() // its statement was cut short: the connection is unusable
	srv.Resume()
	if p := srv.Paused(); p != nil {
		t.Errorf("Paused() after Resume = %v", p)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("after Resume: %v", err)
	}

	for _, crash := range []bool{false, true} {
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := srv.RestartAfter(ctx, crash, 500*time.Millisecond); err != nil {
			t.Fatalf("RestartAfter(crash=%v): %v", crash, err)
		}
		if d := time.Since(start); d < 500*time.Millisecond {
			t.Errorf("RestartAfter(crash=%v) returned after %v, before the downtime", crash, d)
		}
		if err := db.PingContext(ctx); err != nil {
			t.Errorf("after RestartAfter(crash=%v): %v", crash, err)
		}
	}
}
