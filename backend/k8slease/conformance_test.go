package k8slease_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/recipe"
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

// TestHolderConformance: Mutex as a recipe.HolderObserver
// (locktest.RunHolder), observed from a Session of its own.
func TestHolderConformance(t *testing.T) {
	t.Parallel()
	h := &harness{e: newEnv(t)}
	locktest.RunHolder(t, h, func(tb testing.TB, lock string) recipe.HolderObserver {
		s, _ := h.e.connect(tb, k8stest.AdminUser)
		return mutex(tb, s, lock)
	})
}
