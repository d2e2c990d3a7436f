package leader_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/testkit/leadtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/metricstest"
)

// The events of these tests include leader.LeadingMetrics's.
var _ leader.LeadingMetrics = (*metricstest.Events)(nil)

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

// TestMetrics: WithMetrics reports every attempt (started, done with its
// error), each term to LeadingMetrics (+1, -1), and LeaseLost with the
// lease's cause only for the term that lost its lease, not for the one
// that stepped down nor for the one the caller ended.
func TestMetrics(t *testing.T) {
	lock, s := cutLock(t, memlock.WithLogger(quietLog))
	rec := &metricstest.Events{Messages: true}
	err, stopped := leadtest.ThreeTerms(t, lock, s.CutOff, s.Heal, leader.WithMetrics(rec, "job"))
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
