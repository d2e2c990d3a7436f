package leader_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/metricstest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/promtest"
)

// The events of these tests include leader.LeadingMetrics's.
var _ leader.LeadingMetrics = (*metricstest.Events)(nil)

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
	}, append(opts, quiet, noWait, leader.WithOnReturn(leader.Requeue(0)))...)
	return err, stopped
}

// TestMetrics: WithMetrics reports every attempt (started, done with its
// error), each term to LeadingMetrics (+1, -1), and LeaseLost with the
// lease's cause only for the term that lost its lease, not for the one
// that stepped down nor for the one the caller ended.
func TestMetrics(t *testing.T) {
	lock, s := cutLock(t, memlock.WithLogger(quietLog))
	rec := &metricstest.Events{Messages: true}
	err, stopped := threeTerms(t, lock, s, leader.WithMetrics(rec, "job"))
	if !errors.Is(err, stopped) {
		t.Fatalf("Run = %v, want the stop's cause", err)
	}
	term := []string{"started leader job", "done leader job nil", "leading job +1"}
	var want []string
	want = append(append(want, term...), "leading job -1")
	want = append(append(want, term...), "lost leader job suspended (recipe: connection suspended)", "leading job -1")
	want = append(append(want, term...), "leading job -1")
	rec.Expect(t, "three terms", want...)

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
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run = %v, want context.DeadlineExceeded", err)
	}
	rec.Expect(t, "stopped while waiting", "started leader job", "done leader job deadline (context deadline exceeded)")
}

// TestMetricsPrometheus: one prommetrics.Metrics serves the lock's backend
// (memlock.WithMetrics: kind "lock") and Run (leader.WithMetrics: kind
// "leader"), as docs/metrics.md wires it; a scrape after three terms.
func TestMetricsPrometheus(t *testing.T) {
	m, reg := promtest.New()
	lock, s := cutLock(t, memlock.WithMetrics(m), memlock.WithLogger(quietLog))
	if err, stopped := threeTerms(t, lock, s, leader.WithMetrics(m, "job")); !errors.Is(err, stopped) {
		t.Fatalf("Run = %v, want the stop's cause", err)
	}
	want := `
zkrecipes_acquire_started_total{kind="leader",path="job"} 3
zkrecipes_acquire_started_total{kind="lock",path="job-lock"} 3
zkrecipes_leading{path="job"} 0
zkrecipes_leases_lost_total{cause="suspended",kind="leader",path="job"} 1
zkrecipes_leases_lost_total{cause="suspended",kind="lock",path="job-lock"} 1
`
	if err := promtest.Compare(reg, want); err != nil {
		t.Error(err)
	}
}
