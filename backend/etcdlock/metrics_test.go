package etcdlock_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/metrics/prommetrics"
	"github.com/zkrecipes/zkrecipes/metrics/prommetrics/promtest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/metricstest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// logs is a slog.Handler that keeps the lease-lost lines of grant.Reporter
// and every record at INFO or above.
type logs struct {
	mu   sync.Mutex
	lost []slog.Record
}

func (h *logs) Enabled(context.Context, slog.Level) bool { return true }
func (h *logs) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "etcdlock: lease lost" || r.Level >= slog.LevelInfo {
		h.mu.Lock()
		h.lost = append(h.lost, r.Clone())
		h.mu.Unlock()
	}
	return nil
}
func (h *logs) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logs) WithGroup(string) slog.Handler      { return h }

// lines returns the records kept as "LEVEL message lock=... cause=reason".
func (h *logs) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.lost {
		line := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "lock":
				line += " lock=" + a.Value.String()
			case "cause":
				err, _ := a.Value.Any().(error)
				line += " cause=" + prommetrics.Reason(err)
			}
			return true
		})
		out = append(out, line)
	}
	return out
}

// TestMetrics checks the events a Session reports to WithMetrics through a
// grant, a refused TryAcquire, a waiter, a cut-off (SUSPENDED), a revoked
// lease (LOST), the new etcd leases granted after each (RECONNECTED) and
// Close; and that each lost Lease is logged once at WARN with its cause
// (DEBUG at Close).
func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec, h := &metricstest.Events{}, &logs{}
	s, p := e.connect(t, etcdlock.WithMetrics(rec), etcdlock.WithLogger(slog.New(h)))
	rec.Expect(t, "Connect", "state UNKNOWN CONNECTED nil")
	const name = "metrics"
	m := mutex(t, s, name)
	l1, err := m.Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryAcquire(opCtx(t)); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire while held: %v", err)
	}
	rec.Expect(t, "Acquire, TryAcquire", "started lock metrics", "done lock metrics nil",
		"started lock metrics", "done lock metrics locked")

	ch := acquireAsync(opCtx(t), m)
	rec.WaitFor(t, 10*time.Second, "waiting lock metrics +1")
	if err := l1.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch, 15*time.Second, "the waiter")
	if r.err != nil {
		t.Fatal(r.err)
	}
	rec.Expect(t, "a waiter granted after a Release", "started lock metrics", "waiting lock metrics +1",
		"waiting lock metrics -1", "done lock metrics nil")

	done := s.Done() // closed once the loss is reported
	p.Blackhole()
	<-done
	rec.Expect(t, "cut off", "lost lock metrics suspended", "state CONNECTED SUSPENDED suspended")
	p.Resume()
	e.expectKeys(t, name, 0, "the lost etcd lease's key revoked or expired")
	l3, err := m.Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	rec.Expect(t, "Acquire after the cut", "started lock metrics", "state SUSPENDED RECONNECTED nil",
		"done lock metrics nil")

	done = s.Done()
	if _, err := e.in.Revoke(opCtx(t), s.ID()); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := l3.Release(opCtx(t)); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Release of the revoked lease: %v, want recipe.ErrLeaseLost", err)
	}
	rec.Expect(t, "lease revoked", "lost lock metrics session_lost", "state RECONNECTED LOST session_lost")
	l4, err := m.Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	rec.Expect(t, "Acquire after the revoke", "started lock metrics", "state LOST RECONNECTED nil",
		"done lock metrics nil")
	s.Close()
	s.Close()
	<-l4.Context().Done()
	rec.Expect(t, "Close", "lost lock metrics session_closed", "state RECONNECTED LOST session_closed")

	want := []string{
		"WARN etcdlock: lease lost lock=metrics cause=suspended",
		"WARN etcdlock: lease lost lock=metrics cause=session_lost",
		"DEBUG etcdlock: lease lost lock=metrics cause=session_closed",
	}
	if got := h.lines(); !slices.Equal(got, want) {
		t.Errorf("lease-lost log lines\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// TestPrometheus wires prommetrics's adapter to two etcd Sessions and checks
// what a scrape shows after a grant, a TryAcquire that finds the lock held,
// a queued waiter, a holder whose etcd lease an operator revoked, and Close.
func TestPrometheus(t *testing.T) {
	e := newEnv(t)
	pm, reg := promtest.New()
	s1, _ := e.connect(t, etcdlock.WithMetrics(pm))
	s2, _ := e.connect(t, etcdlock.WithMetrics(pm))
	holder, err := mutex(t, s1, "prom").Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	m2 := mutex(t, s2, "prom")
	if _, err := m2.TryAcquire(opCtx(t)); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire while held: %v", err)
	}
	ch := acquireAsync(opCtx(t), m2)
	serverkit.Eventually(t, 10*time.Second, "a waiter in zkrecipes_waiters", func() bool {
		return promtest.Compare(reg, `zkrecipes_waiters{kind="lock",path="prom"} 1`) == nil
	})
	done := s1.Done() // closed once the loss is reported
	if _, err := e.in.Revoke(opCtx(t), s1.ID()); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch, 15*time.Second, "the waiter")
	if r.err != nil {
		t.Fatal(r.err)
	}
	<-done
	if cause := context.Cause(holder.Context()); !errors.Is(cause, recipe.ErrSessionLost) {
		t.Fatalf("the holder's cause: %v, want recipe.ErrSessionLost", cause)
	}
	if err := promtest.Compare(reg, `
zkrecipes_acquire_failures_total{kind="lock",path="prom",reason="locked"} 1
zkrecipes_acquire_started_total{kind="lock",path="prom"} 3
zkrecipes_leases_lost_total{cause="session_lost",kind="lock",path="prom"} 1
zkrecipes_sessions{state="CONNECTED"} 1
zkrecipes_sessions{state="LOST"} 1
zkrecipes_waiters{kind="lock",path="prom"} 0
`); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(pm, "zkrecipes_acquire_duration_seconds"); n != 2 {
		t.Fatalf("acquire duration series: %d, want 2 (acquired, failed)", n)
	}
	if err := r.lease.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	s1.Close()
	s2.Close()
	if err := promtest.Compare(reg, `
zkrecipes_sessions{state="CONNECTED"} 0
zkrecipes_sessions{state="LOST"} 0
zkrecipes_session_transitions_total{state="CONNECTED"} 2
zkrecipes_session_transitions_total{state="LOST"} 3
`); err != nil {
		t.Fatal(err)
	}
}
