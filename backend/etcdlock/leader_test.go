package etcdlock_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit/leadtest"
)

// TestLeaderLoop runs leader.Run's scenario (testkit/leadtest) on etcd:
// candidates take turns, a cut-off leader is replaced after its context
// ended, and a stop leaves no key.
func TestLeaderLoop(t *testing.T) {
	t.Parallel()
	leadtest.Run(t, &harness{e: newEnv(t)})
}

// TestLeaderHealth runs leader.Health's scenario (leadtest.Health): a
// leader whose function outlives its lease is reported unhealthy within
// the tolerance.
func TestLeaderHealth(t *testing.T) {
	leadtest.Health(t, &harness{e: newEnv(t)})
}
