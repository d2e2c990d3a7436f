package redislock_test

import (
	"os"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/testkit/leadtest"
)

// The Redis URL and key prefix of TestHealthStoppedLeaderChild.
const (
	envStoppedChild       = "REDISLOCK_TEST_STOPPED_CHILD_URL"
	envStoppedChildPrefix = "REDISLOCK_TEST_STOPPED_CHILD_PREFIX"
)

// TestHealthStoppedLeader is leadtest.StoppedLeader on Redis: a leader
// process on a 2 s lease, stopped (SIGSTOP) past it.
func TestHealthStoppedLeader(t *testing.T) {
	h := newHarness(t)
	leadtest.StoppedLeader(t, "TestHealthStoppedLeaderChild",
		[]string{envStoppedChild + "=" + h.srv.URL(), envStoppedChildPrefix + "=" + h.srv.KeyPrefix()},
		mustNew(t, connect(t, h.srv, nil), "stopped"))
}

// TestHealthStoppedLeaderChild is the leader process of
// TestHealthStoppedLeader (it does nothing in a normal run).
func TestHealthStoppedLeaderChild(t *testing.T) {
	url := os.Getenv(envStoppedChild)
	if url == "" {
		return // not the child
	}
	s, err := redislock.Connect(t.Context(), url, redislock.WithTTL(2*time.Second),
		redislock.WithKeyPrefix(os.Getenv(envStoppedChildPrefix)))
	if err != nil {
		t.Fatal(err)
	}
	leadtest.StoppedLeaderChild(t, mustNew(t, s, "stopped"))
}
