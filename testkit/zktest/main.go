package zktest

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"go.uber.org/goleak"
)

// Main is for TestMain: func TestMain(m *testing.M) { zktest.Main(m) }.
// It is MainThen with no cleanup.
func Main(m *testing.M) { MainThen(m, nil) }

// MainThen is serverkit.MainThen for a test binary that uses ZooKeeper
// servers: after the tests and cleanup (if not nil), it deletes the example
// chroots, stops the Shared server and removes the compiled seed classes,
// and then ends the process spawner and checks with goleak that no
// goroutine is left (serverkit.Run). It exits with the tests' code, or 1
// when goroutines leaked or the shared server could not be stopped cleanly.
func MainThen(m *testing.M, cleanup func()) {
	// go-zookeeper v1.0.4 can leave its connection loop blocked in
	// flushRequests after Close when a request is queued in the same
	// instant (docs/design.md, the hazards after the assumptions about
	// go-zookeeper): upstream's leak, not ours.
	upstream := goleak.IgnoreTopFunction("github.com/go-zookeeper/zk.(*Conn).flushRequests")
	os.Exit(serverkit.Run(m, cleanup, stopAll, upstream))
}

// stopAll deletes the example chroots, stops the Shared server and removes
// the compiled seed classes, after the tests.
func stopAll() error {
	var errs []error
	if err := closeExampleViews(); err != nil {
		errs = append(errs, fmt.Errorf("zktest: deleting example chroots: %w", err))
	}
	if err := stopShared(); err != nil {
		errs = append(errs, fmt.Errorf("zktest: stopping the shared server: %w", err))
	}
	removeSeedClasses()
	return errors.Join(errs...)
}
