package k8slease_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit/leadtest"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
)

// TestConformance runs the backend-neutral conformance suite (testkit/locktest)
// against Mutex on a real API server, with real crash (proxy closed) and
// cut-off (proxy blackholed) hooks.
func TestConformance(t *testing.T) {
	t.Parallel()
	locktest.Run(t, &harness{e: newEnv(t)})
}

// TestLeaderLoop runs leader.Run's scenario (testkit/leadtest) on
// Kubernetes: candidates take turns, a cut-off leader is replaced after its
// context ended, and a stop leaves no holder.
func TestLeaderLoop(t *testing.T) {
	t.Parallel()
	leadtest.Run(t, &harness{e: newEnv(t)})
}

// TestLeaderHealth runs leader.Health's scenario (leadtest.Health).
func TestLeaderHealth(t *testing.T) {
	t.Parallel()
	leadtest.Health(t, &harness{e: newEnv(t)})
}
