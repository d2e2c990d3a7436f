package k8slease_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/leadtest"
	"github.com/zkrecipes/zkrecipes/recipe/locktest"
)

// TestConformance runs the backend-neutral conformance suite (recipe/locktest)
// against Mutex on a real API server, with real crash (proxy closed) and
// cut-off (proxy blackholed) hooks.
func TestConformance(t *testing.T) {
	t.Parallel()
	locktest.Run(t, &harness{e: newEnv(t)})
}

// TestLeaderLoop runs leader.Run's scenario (internal/leadtest) on
// Kubernetes: candidates take turns, a cut-off leader is replaced after its
// context ended, and a stop leaves no holder.
func TestLeaderLoop(t *testing.T) {
	t.Parallel()
	leadtest.Run(t, &harness{e: newEnv(t)})
}
