package etcdlock_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit/locktest"
)

// TestConformance runs the backend-neutral conformance suite (testkit/locktest)
// against Mutex on the real server, with real crash (proxy closed) and
// cut-off (proxy blackholed) hooks.
func TestConformance(t *testing.T) {
	t.Parallel()
	locktest.Run(t, &harness{e: newEnv(t)})
}
