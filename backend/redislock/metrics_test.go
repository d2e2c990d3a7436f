package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/recipe/zkprom"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// recorder is a recipe.Metrics that keeps every event as a line
// ("started", "done <err>", "waiting +1", "lost <cause>"), each checked to
// name kind "lock" and the lock's name. SessionState and StaleRejected
// fail the test: the package never calls them.
type recorder struct {
	t    *testing.T
	name string

	mu     sync.Mutex
	events []string
	took   []time.Duration // of each "done"
}

func (r *recorder) add(kind, dir, ev string) {
	if kind != "lock" || dir != r.name {
		r.t.Errorf("event %q with kind %q, dir %q; want lock, %q", ev, kind, dir, r.name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) AcquireStarted(kind, dir string) { r.add(kind, dir, "started") }

func (r *recorder) AcquireDone(kind, dir string, took time.Duration, err error) {
	r.add(kind, dir, fmt.Sprintf("done %v", err))
	r.mu.Lock()
	r.took = append(r.took, took)
	r.mu.Unlock()
}

func (r *recorder) Waiting(kind, dir string, delta int) {
	r.add(kind, dir, fmt.Sprintf("waiting %+d", delta))
}

func (r *recorder) LeaseLost(kind, dir string, cause error) {
	r.add(kind, dir, fmt.Sprintf("lost %v", cause))
}

func (r *recorder) SessionState(from, to recipe.ConnState, cause error) {
	r.t.Errorf("SessionState(%v, %v, %v) called", from, to, cause)
}

func (r *recorder) StaleRejected(e *fence.StaleError) { r.t.Errorf("StaleRejected(%v) called", e) }

// count returns how many events equal ev.
func (r *recorder) count(ev string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e == ev {
			n++
		}
	}
	return n
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, "\n")
}

// TestMetrics checks the events of a grant, a TryAcquire that finds the
// lock held, a waiter, a holder whose key an operator deleted, a cut-off
// holder and Close, and the one WARN line per lost lease, whose cause
// says why.
func TestMetrics(t *testing.T) {
	srv := redistest.Start(t)
	const name = "metrics"
	rec := &recorder{t: t, name: name}
	var logs syncBuffer
	p := zktest.NewFaultProxy()
	t.Cleanup(p.Close)
	s := connect(t, srv, nil, redislock.WithMetrics(rec), redislock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	cut := connect(t, srv, p, redislock.WithMetrics(rec), redislock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	m := mustNew(t, s, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	la, lb := contend(t, srv, m, func() bool { return rec.count("waiting +1") == 1 })
	if err := la.Release(ctx); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Release of the lost lease = %v, want ErrLeaseLost", err)
	}
	release(t, lb)

	lc := acquire(t, mustNew(t, cut, name))
	p.Blackhole()
	waitDone(t, lc.Context(), 2*confTTL, "the cut-off lease")
	p.Resume() // the lease that gave up deletes its key as soon as the server answers
	rdb := srv.Client(t)
	zktest.Eventually(t, 2*confTTL, "the cut-off lease's key deleted", func() bool {
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
// and one WARN line per loss but Close's (DEBUG), with the cause.
func checkEvents(t *testing.T, rec *recorder, logs string) {
	t.Helper()
	deleted := "lost recipe: own entry deleted: a renewal found the key deleted or held by another owner"
	suspended := "lost recipe: connection suspended: no renewal succeeded before the lease's deadline"
	for ev, want := range map[string]int{
		"started": 5, "done <nil>": 4, "done redislock: metrics: recipe: held by another participant": 1,
		"waiting +1": 1, "waiting -1": 1, deleted: 1, suspended: 1, "lost recipe: session closed": 1,
	} {
		if n := rec.count(ev); n != want {
			t.Errorf("%d events %q, want %d; events:\n%v", n, ev, want, rec)
		}
	}
	if n := len(strings.Split(rec.String(), "\n")); n != 15 {
		t.Errorf("%d events, want 15:\n%v", n, rec)
	}
	rec.mu.Lock()
	for _, d := range rec.took {
		if d <= 0 || d > 20*time.Second {
			t.Errorf("AcquireDone took %v", d)
		}
	}
	rec.mu.Unlock()
	if n := strings.Count(logs, `msg="redislock: lease lost"`); n != 2 {
		t.Errorf("%d lease-lost lines, want 2:\n%s", n, logs)
	}
	for _, why := range []string{deleted, suspended} {
		if !hasLine(logs, `level=WARN msg="redislock: lease lost" lock=metrics token=`, strings.TrimPrefix(why, "lost ")) {
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
	zktest.Eventually(t, 10*time.Second, "the waiter counted", counted)
	if err := srv.Client(t).Del(ctx, m.Key()).Err(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, lost.Context(), 2*confTTL, "the lease whose key was deleted")
	if granted = <-got; granted == nil {
		t.FailNow()
	}
	return lost, granted
}

// TestPrometheusAdapter wires package zkprom's adapter to redislock and
// checks what a scrape shows after a grant, a TryAcquire that finds the
// lock held, a waiter, and a holder whose key an operator deleted. Redis
// reports no session states, so zkrecipes_sessions has no series.
func TestPrometheusAdapter(t *testing.T) {
	srv := redistest.Start(t)
	reg := prometheus.NewPedanticRegistry()
	pm := zkprom.New()
	reg.MustRegister(pm)
	s := connect(t, srv, nil, redislock.WithMetrics(pm))
	_, lb := contend(t, srv, mustNew(t, s, "prom"), func() bool { return gathered(t, reg, "zkrecipes_waiters") == 1 })
	release(t, lb)

	want := `
# HELP zkrecipes_acquire_failures_total Acquisitions that ended without a grant, by reason (locked: TryAcquire found it held; canceled, deadline: the caller gave up).
# TYPE zkrecipes_acquire_failures_total counter
zkrecipes_acquire_failures_total{kind="lock",path="prom",reason="locked"} 1
# HELP zkrecipes_acquire_started_total Acquisitions (Acquire, TryAcquire, Campaign) started.
# TYPE zkrecipes_acquire_started_total counter
zkrecipes_acquire_started_total{kind="lock",path="prom"} 3
# HELP zkrecipes_leases_lost_total Granted leases that ended without their own Release, by cause.
# TYPE zkrecipes_leases_lost_total counter
zkrecipes_leases_lost_total{cause="node_deleted",kind="lock",path="prom"} 1
# HELP zkrecipes_waiters Contenders of this process currently queued behind other holders.
# TYPE zkrecipes_waiters gauge
zkrecipes_waiters{kind="lock",path="prom"} 0
`
	names := []string{"zkrecipes_acquire_failures_total", "zkrecipes_acquire_started_total",
		"zkrecipes_leases_lost_total", "zkrecipes_waiters", "zkrecipes_sessions"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(pm, "zkrecipes_acquire_duration_seconds"); n != 2 {
		t.Fatalf("acquire duration series: %d, want 2 (acquired, failed)", n)
	}
}

// gathered returns the value of the only series of a gauge or counter (0
// when it has none yet).
func gathered(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		if gg := mf.GetMetric()[0].GetGauge(); gg != nil {
			return gg.GetValue()
		}
		return mf.GetMetric()[0].GetCounter().GetValue()
	}
	return 0
}
