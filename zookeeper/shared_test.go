package zookeeper

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// defaultParallel is how many tests of the package run at once unless
// -parallel says otherwise: most of them wait on a server, not on a CPU,
// so the default (GOMAXPROCS, 2 on a small machine) would leave the
// package's wall time bounded by its slowest waits in sequence. A test
// calls t.Parallel when it works in a Shared chroot or on a server of its
// own (or one it shares as OnceCluster says); one that looks at the whole
// process (goroutines, heap, slog.Default, CPU) or at the whole shared
// server runs alone, before the parallel ones.
const defaultParallel = "8"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", defaultParallel); err != nil {
			panic(err)
		}
	}
	zktest.MainThen(m, atEnd.run)
}

// atEnd is what runs once every test has ended, before zktest.Main stops
// the Shared server and looks for leaked goroutines.
var atEnd ends

type ends struct {
	mu  sync.Mutex
	fns []func()
}

func (e *ends) add(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fns = append(e.fns, f)
}

func (e *ends) run() {
	e.mu.Lock()
	fns := e.fns
	e.fns = nil
	e.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// OnceCluster is a server of its own that several tests share (one seeded
// or started WithTLS, which zktest.Shared cannot give): the first test that
// asks for it launches it, and it is closed when every test has ended. The
// tests that share one must not stop, restart or pause it, and each works
// in paths of its own. Exported for the package's external tests.
type OnceCluster struct {
	once sync.Once
	cl   *zktest.Cluster
	err  error
}

// Get returns the cluster, launched with opts on the first call; it fails
// t when it could not be launched (then and on every later call).
func (o *OnceCluster) Get(t testing.TB, opts ...zktest.Option) *zktest.Cluster {
	t.Helper()
	o.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		o.cl, o.err = zktest.Launch(ctx, opts...)
		if o.err != nil {
			return
		}
		t.Logf("a shared %s ZooKeeper: %s", o.cl.Provider(), strings.Join(o.cl.Servers(), ","))
		cl := o.cl
		atEnd.add(func() {
			if err := cl.Close(); err != nil {
				// MainThen's cleanup has no error to return: fail the
				// binary here (its servers die with it).
				fmt.Fprintf(os.Stderr, "zookeeper tests: closing a shared cluster: %v\n", err)
				os.Exit(1)
			}
		})
	})
	if o.err != nil {
		t.Fatalf("launching a shared cluster: %v", o.err)
	}
	return o.cl
}
