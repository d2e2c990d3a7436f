package serverkit

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main is for TestMain: func TestMain(m *testing.M) { serverkit.Main(m) }.
// It is MainThen with no cleanup.
func Main(m *testing.M) { MainThen(m, nil) }

// MainThen runs the tests, then cleanup (if not nil: for what a TestMain
// set up before the tests, such as a harness's shared server or a temporary
// directory with a binary the tests run), and exits as Run returns.
func MainThen(m *testing.M, cleanup func()) { os.Exit(Run(m, cleanup, nil)) }

// Run is MainThen for a harness that adds steps of its own (zktest.Main):
// it runs the tests, then cleanup (the TestMain's) and after (the
// harness's), each if not nil, then ends StartChild's spawner thread and,
// if the tests passed, checks with goleak that no goroutine is left,
// ignoring what ignore names (goleak retries for a short while, so
// goroutines that are still winding down are not reported). It returns the
// tests' exit code, or 1 when after failed (its error is printed) or
// goroutines leaked.
func Run(m *testing.M, cleanup func(), after func() error, ignore ...goleak.Option) int {
	code := m.Run()
	if cleanup != nil {
		cleanup()
	}
	if after != nil {
		if err := after(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	stopSpawner()
	if code == 0 {
		if err := goleak.Find(ignore...); err != nil {
			fmt.Fprintf(os.Stderr, "serverkit: goroutines leaked after the tests:\n%v\n", err)
			code = 1
		}
	}
	return code
}
