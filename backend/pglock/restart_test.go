package pglock

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// TestServerCrashRestart: a server that crashes (immediate shutdown) ends
// every session: the holder's lease context ends at once with
// recipe.ErrSessionLost, a waiter's Acquire fails instead of hanging, and
// after the restart tokens keep growing (the counter bump was durable when
// Acquire returned, although the crash came right after it).
func TestServerCrashRestart(t *testing.T) {
	t.Parallel()
	// initdb alone took over opTimeout once, with the package's other
	// tests running and the machine busy: the launch has a bound of its own.
	lctx, lcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	srv, err := pgtest.Launch(lctx) // not the shared server, which other tests use meanwhile
	lcancel()
	if err != nil {
		t.Fatalf("%v (%s)", err, pgtest.InstallHint)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	dsn, err := srv.NewDatabase(ctx, "restart")
	if err != nil {
		t.Fatal(err)
	}
	const lock = "restart"
	session := func() *Session {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		s, err := Connect(ctx, dsn, WithTTL(testTTL), WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, err := New(session(), lock)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(session(), lock)
	if err != nil {
		t.Fatal(err)
	}

	la := mustAcquire(t, a)
	pb := acquireAsync(t, b, ctx)
	for n := 0; n != 2; n = locksNow(t, dsn, lock) {
		time.Sleep(10 * time.Millisecond)
	}

	crashed := time.Now()
	restarted := make(chan error, 1)
	go func() { restarted <- srv.Restart(context.Background(), true) }()
	select {
	case <-la.Context().Done():
		t.Logf("the holder saw the server crash %v after it began", time.Since(crashed).Round(time.Millisecond))
	case <-time.After(testTTL):
		t.Fatalf("the holder's lease context is live %v after the server crashed", testTTL)
	}
	if cause := context.Cause(la.Context()); !errors.Is(cause, recipe.ErrSessionLost) {
		t.Errorf("cause %v, want recipe.ErrSessionLost", cause)
	}
	if r := awaitResult(t, pb, opTimeout, "B, waiting when the server crashed"); r.err == nil || errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("B's Acquire when the server crashed: lease %v, error %v; want a connection error", r.lease, r.err)
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	if err := la.Release(context.Background()); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Release after the crash: %v, want recipe.ErrLeaseLost", err)
	}

	lb := mustAcquire(t, b)
	if lb.Token() <= la.Token() {
		t.Errorf("token %v after the restart is not larger than %v before it", lb.Token(), la.Token())
	}
	mustRelease(t, lb)
}

// locksNow counts the sessions holding or waiting for lock, on a connection
// of its own.
func locksNow(t *testing.T, dsn, lock string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer hangUp(conn)
	n, err := countLocks(ctx, conn, Key(lock))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
