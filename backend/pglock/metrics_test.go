package pglock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/recipe/zkprom"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// events is a recipe.Metrics that records every call as a line:
// "started", "done <err>", "waiting +1", "lost <cause>".
type events struct {
	mu    sync.Mutex
	lines []string
}

var _ recipe.Metrics = (*events)(nil)

func (e *events) add(kind, dir, line string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lines = append(e.lines, kind+" "+dir+": "+line)
}

func (e *events) AcquireStarted(kind, dir string) { e.add(kind, dir, "started") }
func (e *events) AcquireDone(kind, dir string, took time.Duration, err error) {
	if took <= 0 {
		err = fmt.Errorf("took %v", took)
	}
	e.add(kind, dir, "done "+reason(err))
}
func (e *events) Waiting(kind, dir string, delta int) {
	e.add(kind, dir, fmt.Sprintf("waiting %+d", delta))
}
func (e *events) LeaseLost(kind, dir string, cause error) {
	e.add(kind, dir, "lost "+reason(cause))
}
func (e *events) SessionState(from, to recipe.ConnState, cause error) {
	e.add("", "", fmt.Sprintf("session %v -> %v", from, to))
}
func (e *events) StaleRejected(*fence.StaleError) { e.add("", "", "stale") }

// take returns the lines recorded since the last take.
func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.lines
	e.lines = nil
	return l
}

// reason is zkprom's label for err, "nil" for none.
func reason(err error) string {
	if err == nil {
		return "nil"
	}
	return zkprom.Reason(err)
}

func (e *events) expect(t *testing.T, step string, want ...string) {
	t.Helper()
	if got := e.take(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: events\n\t%s\nwant\n\t%s", step, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// terminate ends, from the administrator's connection, the server session
// holding m's lock (pg_terminate_backend).
func (h *harness) terminate(t *testing.T, m *Mutex) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := query(context.Background(), h.adm, "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "+
		"AND classid = $1::oid AND objid = $2::oid AND granted",
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
	h := newHarness(t)
	var ev events
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := h.session(t, zktest.NewFaultProxy(), WithMetrics(&ev), WithLogger(log))
	const name = "metrics/a lock"
	m, err := New(s, name)
	if err != nil {
		t.Fatal(err)
	}
	p := "lock " + name + ": "
	other := h.NewClient(t, name).(*client) // no metrics

	la := mustAcquire(t, m)
	ev.expect(t, "a free lock's Acquire", p+"started", p+"done nil")
	if _, err := m.TryAcquire(context.Background()); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire of a held lock: %v", err)
	}
	ev.expect(t, "TryAcquire of a held lock", p+"started", p+"done locked")
	mustRelease(t, la)
	ev.expect(t, "Release")

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
	ev.expect(t, "an Acquire that waited", p+"started", p+"waiting +1", p+"waiting -1", p+"done nil")

	h.terminate(t, m)
	<-r.lease.Context().Done()
	if err := r.lease.Release(context.Background()); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Release after the loss: %v, want recipe.ErrLeaseLost", err)
	}
	ev.expect(t, "a holder whose session the server ended", p+"lost session_lost")
	warn := regexp.MustCompile(`level=WARN msg="pglock: lease lost" lock="` + regexp.QuoteMeta(name) + `" token=\d+ cause="recipe: session lost`)
	if n := len(warn.FindAllString(logs.String(), -1)); n != 1 {
		t.Errorf("%d WARN lines for the lost lease, want 1 with the cause:\n%s", n, logs.String())
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := m.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled context: %v", err)
	}
	ev.expect(t, "an Acquire given up", p+"started", p+"done canceled")

	mustAcquire(t, m)
	s.Close()
	ev.expect(t, "a holder, then Close", p+"started", p+"done nil", p+"lost session_closed")
	if !strings.Contains(logs.String(), `level=DEBUG msg="pglock: lease lost" lock="`+name+`"`) {
		t.Errorf("the lease Close ended is not logged at DEBUG:\n%s", logs.String())
	}
	if _, err := m.TryAcquire(context.Background()); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Fatalf("TryAcquire after Close: %v", err)
	}
	ev.expect(t, "TryAcquire after Close", p+"started", p+"done session_closed")
}

// TestMetricsPrometheus wires recipe/zkprom's adapter to pglock and checks
// what a scrape shows after a grant, a TryAcquire that found the lock held,
// a waiter and a lost lease.
func TestMetricsPrometheus(t *testing.T) {
	h := newHarness(t)
	reg := prometheus.NewPedanticRegistry()
	pm := zkprom.New()
	reg.MustRegister(pm)
	s := h.session(t, zktest.NewFaultProxy(), WithMetrics(pm))
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
	zktest.Eventually(t, opTimeout, "a waiter in zkrecipes_waiters", func() bool {
		return gauge(t, reg, "zkrecipes_waiters") == 1
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
# HELP zkrecipes_acquire_failures_total Acquisitions that ended without a grant, by reason (locked: TryAcquire found it held; canceled, deadline: the caller gave up).
# TYPE zkrecipes_acquire_failures_total counter
zkrecipes_acquire_failures_total{kind="lock",path="prom",reason="locked"} 1
# HELP zkrecipes_acquire_started_total Acquisitions (Acquire, TryAcquire, Campaign) started.
# TYPE zkrecipes_acquire_started_total counter
zkrecipes_acquire_started_total{kind="lock",path="prom"} 3
# HELP zkrecipes_leases_lost_total Granted leases that ended without their own Release, by cause.
# TYPE zkrecipes_leases_lost_total counter
zkrecipes_leases_lost_total{cause="session_lost",kind="lock",path="prom"} 1
# HELP zkrecipes_waiters Contenders of this process currently queued behind other holders.
# TYPE zkrecipes_waiters gauge
zkrecipes_waiters{kind="lock",path="prom"} 0
`
	names := []string{"zkrecipes_acquire_failures_total", "zkrecipes_acquire_started_total",
		"zkrecipes_leases_lost_total", "zkrecipes_waiters"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(pm, "zkrecipes_acquire_duration_seconds"); n != 2 {
		t.Fatalf("acquire duration series: %d, want 2 (acquired, failed)", n)
	}
}

// gauge returns the value of the gauge family name (of its only series).
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}
