package pglock

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/leadtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// envStoppedChild names the database of TestHealthStoppedLeaderChild.
const envStoppedChild = "PGLOCK_TEST_STOPPED_CHILD_DSN"

// TestHealthStoppedLeader is leadtest.StoppedLeader on PostgreSQL: a
// leader process on a 2 s lease, stopped (SIGSTOP) past it.
func TestHealthStoppedLeader(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	other, err := New(h.session(t, p), "stopped")
	if err != nil {
		t.Fatal(err)
	}
	leadtest.StoppedLeader(t, "TestHealthStoppedLeaderChild", []string{envStoppedChild + "=" + h.dsn}, other)
}

// TestHealthStoppedLeaderChild is the leader process of
// TestHealthStoppedLeader (it does nothing in a normal run).
func TestHealthStoppedLeaderChild(t *testing.T) {
	dsn := os.Getenv(envStoppedChild)
	if dsn == "" {
		return // not the child
	}
	s, err := Connect(t.Context(), dsn, WithTTL(2*time.Second), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(s, "stopped")
	if err != nil {
		t.Fatal(err)
	}
	leadtest.StoppedLeaderChild(t, m)
}
