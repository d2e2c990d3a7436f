package prommetrics_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/metrics/prommetrics/promtest"
	"github.com/zkrecipes/zkrecipes/testkit/leadtest"
)

// TestMetricsPrometheus: one prommetrics.Metrics serves the lock's backend
// (memlock.WithMetrics: kind "lock") and leader.Run (leader.WithMetrics:
// kind "leader"), as docs/metrics.md wires it; a scrape after the three
// terms of package leader's TestMetrics (leadtest.ThreeTerms).
func TestMetricsPrometheus(t *testing.T) {
	m, reg := promtest.New()
	srv, err := memlock.NewServer(memlock.WithTTL(300 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	s := srv.Connect(memlock.WithMetrics(m), memlock.WithLogger(slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { s.Close() })
	lock, err := memlock.New(s, "job-lock")
	if err != nil {
		t.Fatal(err)
	}
	if err, stopped := leadtest.ThreeTerms(t, lock, s.CutOff, s.Heal, leader.WithMetrics(m, "job")); !errors.Is(err, stopped) {
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
