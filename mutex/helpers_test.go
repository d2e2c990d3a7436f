package mutex_test

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/zookeeper"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestMain runs the package's tests. Every test has its own server
// (zktest.Start) or its own chroot on the shared one (zktest.Shared), and
// most call t.Parallel: they mostly wait. Those that bound a time (a short
// session timeout, the 250 ms cleanup wait of C4 and of Release, a
// lock-delay served; the conformance suites) do not: Go runs them first,
// before any parallel test, so the package's own load cannot make them late
// (their subtests still run in parallel, among themselves).
// TestMain runs the tests, up to 4 at once (go test -parallel still wins),
// not GOMAXPROCS (2 on the project's machines): the parallel ones wait on a
// chroot of their own or a server of their own; the ones that bound a time
// stay serial. Then zktest.Main stops the shared server and checks for
// leaked goroutines.
func TestMain(m *testing.M) {
	if err := flag.Set("test.parallel", "4"); err != nil {
		panic(err)
	}
	zktest.Main(m)
}

// newMutex builds a Mutex or fails the test.
func newMutex(t testing.TB, s *zookeeper.Session, p string) *mutex.Mutex {
	t.Helper()
	m, err := mutex.New(s, p)
	if err != nil {
		t.Fatalf("mutex.New(%q): %v", p, err)
	}
	return m
}

// acquireAsync starts Acquire in a goroutine; the result arrives on the channel.
func acquireAsync(ctx context.Context, l recipe.Lock) <-chan rtest.Result {
	return rtest.Async(ctx, l.Acquire)
}

func release(t testing.TB, l recipe.Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
}

// acquireAndRelease checks that a fresh client gets the lock within 10 s
// (nothing left behind blocks it), then releases it.
func acquireAndRelease(t testing.TB, cl *zktest.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := newMutex(t, rtest.Connect(t, cl), dir).Acquire(ctx)
	if err != nil {
		t.Fatalf("a fresh client could not acquire: %v", err)
	}
	release(t, l)
}

// handOver queues next behind the holder of held, releases held, and checks
// that next acquires within 10 s (nothing left behind blocks it), then
// releases it.
func handOver(t testing.TB, held recipe.Lease, next recipe.Lock) {
	t.Helper()
	ch := acquireAsync(context.Background(), next)
	release(t, held)
	r := rtest.Await(t, ch, 10*time.Second)
	if r.Err != nil {
		t.Fatalf("next holder: %v", r.Err)
	}
	release(t, r.Lease)
}

// markerName is the lock-delay marker's name beside a lock's nodes
// (docs/lock-delay.md#lock-delay-on-zookeeper).
const markerName = "_lock-delay"
