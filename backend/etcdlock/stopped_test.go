package etcdlock_test

import (
	"os"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/testkit/leadtest"
)

// envStoppedChild names the etcd URL of TestHealthStoppedLeaderChild.
const envStoppedChild = "ETCDLOCK_TEST_STOPPED_CHILD_URL"

// TestHealthStoppedLeader is leadtest.StoppedLeader on etcd: a leader
// process on a 2 s lease, stopped (SIGSTOP) past it.
func TestHealthStoppedLeader(t *testing.T) {
	e := newEnv(t)
	s, _ := e.connect(t)
	leadtest.StoppedLeader(t, "TestHealthStoppedLeaderChild", []string{envStoppedChild + "=" + e.srv.URL(e.prefix)}, mutex(t, s, "stopped"))
}

// TestHealthStoppedLeaderChild is the leader process of
// TestHealthStoppedLeader (it does nothing in a normal run).
func TestHealthStoppedLeaderChild(t *testing.T) {
	url := os.Getenv(envStoppedChild)
	if url == "" {
		return // not the child
	}
	s, err := etcdlock.Connect(t.Context(), url, etcdlock.WithTTL(2*time.Second), etcdlock.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	leadtest.StoppedLeaderChild(t, mutex(t, s, "stopped"))
}
