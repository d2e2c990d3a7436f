package etcdlock_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
)

// TestConformance runs the backend-neutral conformance suite (testkit/locktest)
// against Mutex on the real server, with real crash (proxy closed) and
// cut-off (proxy blackholed) hooks.
func TestConformance(t *testing.T) {
	t.Parallel()
	locktest.Run(t, &harness{e: newEnv(t)})
}

// TestHolderConformance: Mutex as a recipe.HolderObserver
// (locktest.RunHolder), observed from a Session of its own.
func TestHolderConformance(t *testing.T) {
	t.Parallel()
	h := &harness{e: newEnv(t)}
	locktest.RunHolder(t, h, func(tb testing.TB, lock string) recipe.HolderObserver {
		s, _ := h.e.connect(tb)
		return mutex(tb, s, "locktest/"+lock)
	})
}
