package leader_test

import (
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/testkit/leadtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// The child process of TestHealthStoppedLeader: its servers and its lock.
const (
	envStoppedChild = "LEADER_TEST_STOPPED_CHILD_SERVERS"
	stoppedLock     = "/leader/stopped"
)

// TestHealthStoppedLeader is leadtest.StoppedLeader on ZooKeeper: a leader
// process on a 2 s session, stopped (SIGSTOP) past it.
func TestHealthStoppedLeader(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	other, err := mutex.New(rtest.Connect(t, cl), stoppedLock)
	if err != nil {
		t.Fatal(err)
	}
	leadtest.StoppedLeader(t, "TestHealthStoppedLeaderChild", []string{envStoppedChild + "=" + strings.Join(cl.Servers(), ",")}, other)
}

// TestHealthStoppedLeaderChild is the leader process of
// TestHealthStoppedLeader (it does nothing in a normal run).
func TestHealthStoppedLeaderChild(t *testing.T) {
	servers := os.Getenv(envStoppedChild)
	if servers == "" {
		return // not the child
	}
	s, err := zookeeper.Connect(t.Context(), strings.Split(servers, ","), zookeeper.WithSessionTimeout(2*time.Second),
		zookeeper.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := mutex.New(s, stoppedLock)
	if err != nil {
		t.Fatal(err)
	}
	leadtest.StoppedLeaderChild(t, m)
}
