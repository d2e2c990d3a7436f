package pglock

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zkrecipes/zkrecipes/metrics/prommetrics/promtest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/metricstest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// terminate ends, from the administrator's connection, the server session
// holding m's lock (pg_terminate_backend).
func (h *harness) terminate(t *testing.T, m *Mutex) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := query(context.Background(), h.adm, "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "+
		"AND classid = $1::oid AND objid = $2::oid AND granted "+
		"AND database = (SELECT oid FROM pg_database WHERE datname = current_database())", // this test's database only
		strconv.FormatUint(uint64(m.key)>>32, 10), strconv.FormatUint(uint64(m.key)&0xffffffff, 10))
	if err != nil {
		t.Fatal(err)
	}
}

// TestMetricsEvents: every Acquire and TryAcquire reports started and done
// with its error, an Acquire that finds the lock held reports its wait, a
// lease that ends other than by Release reports its loss (once, and logged
// once at WARN with its cause; at DEBUG when Session.Close ended it), a
// Release reports nothing. kind is "lock", dir the lock's name.
func TestMetricsEvents(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var ev metricstest.Events
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := h.session(t, serverkit.NewFaultProxy(), WithMetrics(&ev), WithLogger(log))
	const name = "metrics/a lock"
	m, err := New(s, name)
	if err != nil {
		t.Fatal(err)
	}
	p := "lock " + name                     // the kind and dir of every event
	other := h.NewClient(t, name).(*client) // no metrics

	la := mustAcquire(t, m)
	ev.Expect(t, "a free lock's Acquire", "started "+p, "done "+p+" nil")
	if _, err := m.TryAcquire(context.Background()); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire of a held lock: %v", err)
	}
	ev.Expect(t, "TryAcquire of a held lock", "started "+p, "done "+p+" locked")
	mustRelease(t, la)
	ev.Expect(t, "Release")

	lo := mustAcquire(t, other.Mutex)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	pw := acquireAsync(t, m, ctx)
	h.waitLocks(t, name, 2)
	mustRelease(t, lo)
	r := awaitResult(t, pw, opTimeout, "the waiter")
	if r.err != nil {
		t.Fatal(r.err)
	}
	ev.Expect(t, "an Acquire that waited", "started "+p, "waiting "+p+" +1", "waiting "+p+" -1", "done "+p+" nil")

	h.terminate(t, m)
	<-r.lease.Context().Done()
	if err := r.lease.Release(context.Background()); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Release after the loss: %v, want recipe.ErrLeaseLost", err)
	}
	ev.Expect(t, "a holder whose session the server ended", "lost "+p+" session_lost")
	warn := regexp.MustCompile(`level=WARN msg="pglock: lease lost" lock="` + regexp.QuoteMeta(name) + `" token=\d+ cause="recipe: session lost`)
	if n := len(warn.FindAllString(logs.String(), -1)); n != 1 {
		t.Errorf("%d WARN lines for the lost lease, want 1 with the cause:\n%s", n, logs.String())
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := m.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled context: %v", err)
	}
	ev.Expect(t, "an Acquire given up", "started "+p, "done "+p+" canceled")

	// The terminated backend frees its lock as it exits, which can come
	// after its client saw the loss: a grant before that would wait.
	h.waitLocks(t, name, 0)
	mustAcquire(t, m)
	s.Close()
	ev.Expect(t, "a holder, then Close", "started "+p, "done "+p+" nil", "lost "+p+" session_closed")
	if !strings.Contains(logs.String(), `level=DEBUG msg="pglock: lease lost" lock="`+name+`"`) {
		t.Errorf("the lease Close ended is not logged at DEBUG:\n%s", logs.String())
	}
	if _, err := m.TryAcquire(context.Background()); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Fatalf("TryAcquire after Close: %v", err)
	}
	ev.Expect(t, "TryAcquire after Close", "started "+p, "done "+p+" session_closed")
}

// TestMetricsPrometheus wires recipe/prommetrics's adapter to pglock and checks
// what a scrape shows after a grant, a TryAcquire that found the lock held,
// a waiter and a lost lease.
func TestMetricsPrometheus(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	pm, reg := promtest.New()
	s := h.session(t, serverkit.NewFaultProxy(), WithMetrics(pm))
	const name = "prom"
	m, err := New(s, name)
	if err != nil {
		t.Fatal(err)
	}

	la := mustAcquire(t, m)
	if _, err := m.TryAcquire(context.Background()); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire of a held lock: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	pw := acquireAsync(t, m, ctx)
	serverkit.Eventually(t, opTimeout, "a waiter in zkrecipes_waiters", func() bool {
		return promtest.Value(t, reg, "zkrecipes_waiters") == 1
	})
	mustRelease(t, la)
	r := awaitResult(t, pw, opTimeout, "the waiter")
	if r.err != nil {
		t.Fatal(r.err)
	}
	h.terminate(t, m)
	<-r.lease.Context().Done()
	if err := r.lease.Release(context.Background()); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Release after the loss: %v, want recipe.ErrLeaseLost", err)
	}

	want := `
zkrecipes_acquire_failures_total{kind="lock",path="prom",reason="locked"} 1
zkrecipes_acquire_started_total{kind="lock",path="prom"} 3
zkrecipes_leases_lost_total{cause="session_lost",kind="lock",path="prom"} 1
zkrecipes_waiters{kind="lock",path="prom"} 0
`
	if err := promtest.Compare(reg, want); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(pm, "zkrecipes_acquire_duration_seconds"); n != 2 {
		t.Fatalf("acquire duration series: %d, want 2 (acquired, failed)", n)
	}
}
