package zktest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main is for TestMain: func TestMain(m *testing.M) { zktest.Main(m) }.
// It runs the tests, stops the Shared server, ends zktest's process spawner,
// and then, if the tests passed, checks with goleak that no goroutine is left
// (it retries for a short while, so goroutines that are still winding down
// are not reported). It exits with the tests' code, or 1 when goroutines
// leaked or the shared server could not be stopped cleanly.
func Main(m *testing.M) { MainThen(m, nil) }

// MainThen is Main with cleanup (if not nil) run right after the tests, before
// the shared server is stopped and goroutines are checked: for what a
// TestMain set up before the tests, such as a temporary directory with a
// binary the tests run.
func MainThen(m *testing.M, cleanup func()) {
	code := m.Run()
	if cleanup != nil {
		cleanup()
	}
	if err := closeExampleViews(); err != nil {
		fmt.Fprintf(os.Stderr, "zktest: deleting example chroots: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	if err := stopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "zktest: stopping the shared server: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	stopSpawner()
	removeSeedClasses()
	if code == 0 {
		// go-zookeeper v1.0.4 can leave its connection loop blocked in
		// flushRequests after Close when a request is queued in the same
		// instant (docs/design.md, the hazards after the assumptions about
		// go-zookeeper): upstream's leak, not ours.
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/go-zookeeper/zk.(*Conn).flushRequests")); err != nil {
			fmt.Fprintf(os.Stderr, "zktest: goroutines leaked after the tests:\n%v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
