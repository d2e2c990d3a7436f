package pglock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// boundedSession opens a session whose lock connections carry app as
// application_name, so that conns can count them.
func (h *harness) boundedSession(t testing.TB, cfg *pgconn.Config, app string, opts ...Option) *Session {
	t.Helper()
	cfg = cfg.Copy()
	cfg.RuntimeParams["application_name"] = app
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	opts = append([]Option{WithTTL(testTTL), WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	s, err := ConnectConfig(ctx, cfg, opts...)
	if err != nil {
		t.Fatalf("ConnectConfig: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// conns counts the server sessions named app in pg_stat_activity.
func (h *harness) conns(t testing.TB, app string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	rows, err := query(context.Background(), h.adm, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(string(rows[0][0]))
	return n
}

// TestConnBound is issue 23's finding 3: 200 Acquire calls on 4 locks in
// one Session with WithMaxConns(3) all get their lock in turn, tokens
// growing per lock, while pg_stat_activity never shows more than 3 of the
// session's connections (on main: one per waiter); none is left after.
func TestConnBound(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const app, bound, waiters, locks = "bound-test", 3, 200, 4
	s := h.boundedSession(t, h.cfg, app, WithMaxConns(bound))
	// ConnectConfig's check connection, closed, may still be exiting.
	waitFor(t, func() bool { return h.conns(t, app) == 0 }, "ConnectConfig's connection left")
	stop, peak := make(chan struct{}), make(chan int)
	go func() { // sample the server's count until stop
		most := 0
		for {
			most = max(most, h.conns(t, app))
			select {
			case <-stop:
				peak <- most
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var mu sync.Mutex
	got := map[string][]fence.Token{}
	var wg sync.WaitGroup
	for i := range waiters {
		name := fmt.Sprintf("bound/%d", i%locks)
		m, err := New(s, name)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			l, err := m.Acquire(ctx)
			if err != nil {
				t.Errorf("Acquire %s: %v", name, err)
				return
			}
			time.Sleep(2 * time.Millisecond) // hold it a moment: the others pile up
			mu.Lock()
			got[name] = append(got[name], l.Token())
			mu.Unlock()
			if err := l.Release(ctx); err != nil {
				t.Errorf("Release: %v", err)
			}
		})
	}
	wg.Wait()
	close(stop)
	if p := <-peak; p > bound || p == 0 {
		t.Errorf("peak lock connections %d, want 1..%d", p, bound)
	}
	for name, toks := range got {
		for i := 1; i < len(toks); i++ {
			if toks[i] <= toks[i-1] {
				t.Errorf("%s: token %v after %v", name, toks[i], toks[i-1])
			}
		}
		if len(toks) != waiters/locks {
			t.Errorf("%s: %d grants, want %d", name, len(toks), waiters/locks)
		}
	}
	waitFor(t, func() bool { return h.conns(t, app) == 0 }, "lock connections left after the last Release")
}

// waitFor polls cond for up to opTimeout.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for end := time.Now().Add(opTimeout); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal(what)
		}
	}
}

// TestConnBoundFIFO: waiters for one lock beyond the one at the server wait
// in the process and get the lock in the order they came.
func TestConnBoundFIFO(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.boundedSession(t, h.cfg, "fifo-test", WithMaxConns(2))
	m, err := New(s, "fifo")
	if err != nil {
		t.Fatal(err)
	}
	held := mustAcquire(t, m)
	const n = 8
	order := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			l := mustAcquire(t, m)
			order <- i
			mustRelease(t, l)
		})
		// i+1: the holder's turn ended at its grant
		waitFor(t, func() bool { return queuedOn(s, m.key) == i+1 }, "waiter not queued")
	}
	mustRelease(t, held)
	wg.Wait()
	close(order)
	want := 0
	for i := range order {
		if i != want {
			t.Fatalf("waiter %d got the lock in place %d", i, want)
		}
		want++
	}
}

// TestConnLimitErrors: TryAcquire with every connection of the bound in
// use fails with ErrConnLimit at once, Acquire waits (without a
// connection) until its context ends or a connection is free; a server
// that refuses a connection for the role's limit gives ErrConnLimit too.
func TestConnLimitErrors(t *testing.T) {
	t.Parallel()
	role := pgtest.Shared(t).Role(t, "limited") // before the database: dropped after it
	h := newHarness(t)
	s := h.boundedSession(t, h.cfg, "limit-test", WithMaxConns(1))
	a, _ := New(s, "limit/a")
	b, _ := New(s, "limit/b")
	la := mustAcquire(t, a)
	if l, err := b.TryAcquire(context.Background()); !errors.Is(err, ErrConnLimit) {
		if l != nil {
			l.Release(context.Background())
		}
		t.Fatalf("TryAcquire with the bound in use: %v, want ErrConnLimit", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with the bound in use: %v, want the context's deadline", err)
	}
	if n := h.conns(t, "limit-test"); n != 1 {
		t.Errorf("%d connections while one holder and one waiter beyond the bound, want 1", n)
	}
	mustRelease(t, la)
	mustRelease(t, mustAcquire(t, b))

	h.mu.Lock()
	err := h.adm.Exec(context.Background(), "ALTER ROLE "+role+" CONNECTION LIMIT 1; "+
		"GRANT SELECT, INSERT, UPDATE ON "+DefaultTable+" TO "+role).Close()
	h.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	dsn, err := pgtest.AsRole(h.dsn, role)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	s = h.boundedSession(t, cfg, "limit-role", WithMaxConns(5))
	a, _ = New(s, "limit/a")
	b, _ = New(s, "limit/b")
	la = mustAcquire(t, a)
	defer mustRelease(t, la)
	if l, err := b.TryAcquire(context.Background()); !errors.Is(err, ErrConnLimit) {
		if l != nil {
			l.Release(context.Background())
		}
		t.Fatalf("TryAcquire beyond the role's server limit: %v, want ErrConnLimit", err)
	}
}
