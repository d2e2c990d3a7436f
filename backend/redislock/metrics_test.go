package redislock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/metrics/prommetrics/promtest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/metricstest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// TestMetrics checks the events of a grant, a TryAcquire that finds the
// lock held, a waiter, a holder whose key an operator deleted, a cut-off
// holder and Close, and the one WARN line per lost lease, whose cause
// says why.
func TestMetrics(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const name = "metrics"
	rec := &metricstest.Events{Messages: true}
	rec.Forbid(t, "state", "stale") // the package never calls SessionState or StaleRejected
	var logs syncBuffer
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	s := connect(t, srv, nil, redislock.WithMetrics(rec), redislock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	cut := connect(t, srv, p, redislock.WithMetrics(rec), redislock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	m := mustNew(t, s, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	la, lb := contend(t, srv, m, func() bool { return rec.Count("waiting lock metrics +1") == 1 })
	if err := la.Release(ctx); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Release of the lost lease = %v, want ErrLeaseLost", err)
	}
	release(t, lb)

	lc := acquire(t, mustNew(t, cut, name))
	p.Blackhole()
	waitDone(t, lc.Context(), 2*confTTL, "the cut-off lease")
	p.Resume() // the lease that gave up deletes its key as soon as the server answers
	rdb := srv.Client(t)
	serverkit.Eventually(t, 2*confTTL, "the cut-off lease's key deleted", func() bool {
		n, err := rdb.Exists(ctx, m.Key()).Result()
		return err == nil && n == 0
	})
	ld := acquire(t, m)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(ld.Context()), recipe.ErrSessionClosed) {
		t.Fatalf("held lease after Close: %v", context.Cause(ld.Context()))
	}

	checkEvents(t, rec, logs.String())
}

// checkEvents checks TestMetrics's events and log: every event counted,
// each with kind "lock" and the lock's name, and one WARN line per loss
// but Close's (DEBUG), with the cause.
func checkEvents(t *testing.T, rec *metricstest.Events, logs string) {
	t.Helper()
	deleted := "recipe: own entry deleted: a renewal found the key deleted or held by another owner"
	suspended := "recipe: connection suspended: no renewal succeeded before the lease's deadline"
	for ev, want := range map[string]int{
		"started lock metrics": 5, "done lock metrics nil": 4,
		"done lock metrics locked (redislock: metrics: recipe: held by another participant)": 1,
		"waiting lock metrics +1": 1, "waiting lock metrics -1": 1,
		"lost lock metrics node_deleted (" + deleted + ")":          1,
		"lost lock metrics suspended (" + suspended + ")":           1,
		"lost lock metrics session_closed (recipe: session closed)": 1,
	} {
		if n := rec.Count(ev); n != want {
			t.Errorf("%d events %q, want %d; events:\n\t%s", n, ev, want, strings.Join(rec.Lines(), "\n\t"))
		}
	}
	if n := len(rec.Lines()); n != 15 {
		t.Errorf("%d events, want 15:\n\t%s", n, strings.Join(rec.Lines(), "\n\t"))
	}
	for _, d := range rec.Took() {
		if d <= 0 || d > 20*time.Second {
			t.Errorf("AcquireDone took %v", d)
		}
	}
	if n := strings.Count(logs, `msg="redislock: lease lost"`); n != 2 {
		t.Errorf("%d lease-lost lines, want 2:\n%s", n, logs)
	}
	for _, why := range []string{deleted, suspended} {
		if !hasLine(logs, `level=WARN msg="redislock: lease lost" lock=metrics token=`, why) {
			t.Errorf("no WARN line with %q:\n%s", why, logs)
		}
	}
}

// hasLine reports whether a line of out contains every part.
func hasLine(out string, parts ...string) bool {
	for line := range strings.Lines(out) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// contend is the scenario of both metrics tests on m: a grant, a
// TryAcquire that finds the lock held, a waiter (counted reports when the
// metrics show it), and the holder's key deleted by an operator (no
// PUBLISH), so the waiter is granted at its re-check. It returns the lost
// lease and the waiter's.
func contend(t *testing.T, srv *redistest.Server, m *redislock.Mutex, counted func() bool) (lost, granted recipe.Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lost = acquire(t, m)
	if _, err := m.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire while held = %v, want ErrLocked", err)
	}
	got := make(chan recipe.Lease, 1)
	go func() {
		l, err := m.Acquire(ctx)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	serverkit.Eventually(t, 10*time.Second, "the waiter counted", counted)
	if err := srv.Client(t).Del(ctx, m.Key()).Err(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, lost.Context(), 2*confTTL, "the lease whose key was deleted")
	if granted = <-got; granted == nil {
		t.FailNow()
	}
	return lost, granted
}

// TestPrometheusAdapter wires package prommetrics's adapter to redislock and
// checks what a scrape shows after a grant, a TryAcquire that finds the
// lock held, a waiter, and a holder whose key an operator deleted. Redis
// reports no session states, so zkrecipes_sessions has no series.
func TestPrometheusAdapter(t *testing.T) {
	srv := redistest.Start(t)
	pm, reg := promtest.New()
	s := connect(t, srv, nil, redislock.WithMetrics(pm))
	_, lb := contend(t, srv, mustNew(t, s, "prom"), func() bool { return promtest.Value(t, reg, "zkrecipes_waiters") == 1 })
	release(t, lb)

	want := `
zkrecipes_acquire_failures_total{kind="lock",path="prom",reason="locked"} 1
zkrecipes_acquire_started_total{kind="lock",path="prom"} 3
zkrecipes_leases_lost_total{cause="node_deleted",kind="lock",path="prom"} 1
zkrecipes_waiters{kind="lock",path="prom"} 0
`
	if err := promtest.Compare(reg, want, "zkrecipes_sessions"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(pm, "zkrecipes_acquire_duration_seconds"); n != 2 {
		t.Fatalf("acquire duration series: %d, want 2 (acquired, failed)", n)
	}
}
