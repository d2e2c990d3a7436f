package etcdlock_test

import (
	"flag"
	"testing"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
)

// TestMain stops the shared server after the tests and checks for leaked
// goroutines. The package's parallel tests (the lock-delay's, the
// conformance suites, the cut-offs and restarts) spend their time waiting
// for etcd leases to expire and delays to pass, not computing: they run up
// to 8 at once (go test -parallel still wins), not GOMAXPROCS (2 here),
// which would serialize them. The tests that bound how long something
// takes (connect errors, the silent members) stay serial: they run before
// the parallel ones, alone in the package.
func TestMain(m *testing.M) {
	if err := flag.Set("test.parallel", "8"); err != nil {
		panic(err)
	}
	etcdtest.Main(m)
}
