package leader_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/recipe/memlock"
	"github.com/zkrecipes/zkrecipes/recipe/zkprom"
)

// events is a recipe.Metrics and a leader.LeadingMetrics that records
// every call as a line of text.
type events struct {
	mu    sync.Mutex
	lines []string
}

var _ leader.LeadingMetrics = (*events)(nil)

func (r *events) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

func (r *events) AcquireStarted(kind, dir string) { r.add("started %s %s", kind, dir) }
func (r *events) AcquireDone(kind, dir string, took time.Duration, err error) {
	if took <= 0 {
		r.add("done %s %s with a non-positive duration %v", kind, dir, took)
		return
	}
	r.add("done %s %s %v", kind, dir, err)
}
func (r *events) Waiting(kind, dir string, delta int)     { r.add("waiting %s %s %+d", kind, dir, delta) }
func (r *events) LeaseLost(kind, dir string, cause error) { r.add("lost %s %s %v", kind, dir, cause) }
func (r *events) SessionState(from, to recipe.ConnState, cause error) {
	r.add("state %v->%v", from, to)
}
func (r *events) StaleRejected(e *fence.StaleError) { r.add("stale %s", e.Resource) }
func (r *events) Leading(name string, delta int)    { r.add("leading %s %+d", name, delta) }

func (r *events) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	return l
}

// noWait is a backoff that does not wait.
var noWait = leader.WithBackOff(func() backoff.BackOff { return &backoff.ZeroBackOff{} })

// quietLog discards a backend's warnings where a test provokes them.
var quietLog = slog.New(slog.DiscardHandler)

// cutLock returns a lock on a Session of its own of a Server of the test's
// own, and the Session (to cut it off). opts configure the Session.
func cutLock(t *testing.T, opts ...memlock.SessionOption) (*memlock.Mutex, *memlock.Session) {
	t.Helper()
	srv, err := memlock.NewServer(memlock.WithTTL(300 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	s := srv.Connect(opts...)
	t.Cleanup(func() { s.Close() })
	m, err := memlock.New(s, "job-lock")
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// threeTerms runs Run on lock for three terms: the first steps down, the
// second loses its lease (its Session is cut off, then healed), the third
// is ended by the caller. It returns Run's error and the cause it stopped
// Run with.
func threeTerms(t *testing.T, lock recipe.Lock, s *memlock.Session, opts ...leader.Option) (err, stopped error) {
	t.Helper()
	stopped = errors.New("stopped by the test")
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	n := 0
	err = leader.Run(ctx, lock, func(fctx context.Context, _ fence.Token) error {
		n++
		switch n {
		case 1:
			return nil
		case 2:
			s.CutOff()
			<-fctx.Done()
			s.Heal()
			return nil
		}
		stop(stopped)
		<-fctx.Done()
		return nil
	}, append(opts, quiet, noWait)...)
	return err, stopped
}

// TestMetrics: WithMetrics reports every attempt (started, done with its
// error), each term to LeadingMetrics (+1, -1), and LeaseLost with the
// lease's cause only for the term that lost its lease, not for the one
// that stepped down nor for the one the caller ended.
func TestMetrics(t *testing.T) {
	lock, s := cutLock(t, memlock.WithLogger(quietLog))
	rec := &events{}
	err, stopped := threeTerms(t, lock, s, leader.WithMetrics(rec, "job"))
	if !errors.Is(err, stopped) {
		t.Fatalf("Run = %v, want the stop's cause", err)
	}
	term := []string{"started leader job", "done leader job <nil>", "leading job +1"}
	var want []string
	want = append(append(want, term...), "leading job -1")
	want = append(append(want, term...), "lost leader job recipe: connection suspended", "leading job -1")
	want = append(append(want, term...), "leading job -1")
	if got := rec.take(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}

	// Stopped while waiting for the lock: the attempt ends with the cause.
	other, _ := cutLock(t)
	held, err := other.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = leader.Run(ctx, other, func(context.Context, fence.Token) error { return nil }, leader.WithMetrics(rec, "job"))
	want = []string{"started leader job", "done leader job context deadline exceeded"}
	if got := rec.take(); !errors.Is(err, context.DeadlineExceeded) || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Run = %v, events %q; want context.DeadlineExceeded and %q", err, got, want)
	}
}

// TestMetricsPrometheus: one zkprom.Metrics serves the lock's backend
// (memlock.WithMetrics: kind "lock") and Run (leader.WithMetrics: kind
// "leader"), as docs/metrics.md wires it; a scrape after three terms.
func TestMetricsPrometheus(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := zkprom.New()
	reg.MustRegister(m)
	lock, s := cutLock(t, memlock.WithMetrics(m), memlock.WithLogger(quietLog))
	if err, stopped := threeTerms(t, lock, s, leader.WithMetrics(m, "job")); !errors.Is(err, stopped) {
		t.Fatalf("Run = %v, want the stop's cause", err)
	}
	want := `
# HELP zkrecipes_acquire_started_total Acquisitions (Acquire, TryAcquire, Campaign) started.
# TYPE zkrecipes_acquire_started_total counter
zkrecipes_acquire_started_total{kind="leader",path="job"} 3
zkrecipes_acquire_started_total{kind="lock",path="job-lock"} 3
# HELP zkrecipes_leading Terms of leader.Run that this process leads now, by name.
# TYPE zkrecipes_leading gauge
zkrecipes_leading{path="job"} 0
# HELP zkrecipes_leases_lost_total Granted leases that ended without their own Release, by cause.
# TYPE zkrecipes_leases_lost_total counter
zkrecipes_leases_lost_total{cause="suspended",kind="leader",path="job"} 1
zkrecipes_leases_lost_total{cause="suspended",kind="lock",path="job-lock"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"zkrecipes_acquire_started_total", "zkrecipes_leading", "zkrecipes_leases_lost_total"); err != nil {
		t.Error(err)
	}
}
