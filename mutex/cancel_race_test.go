package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// errGaveUp is the cause of the cancellations of TestCancelledAcquireLeavesNothing.
var errGaveUp = errors.New("gave up")

// TestCancelledAcquireLeavesNothing: an Acquire cancelled at any moment of
// its attempt on a free lock (before, during or after its create's round
// trip, or its delete's) returns only once its node is gone while the
// connection is up, so the directory is empty when it returns and another
// session's TryAcquire gets the lock. Before the fix, the cleanup stopped
// waiting 250 ms after the cancellation (for the create in flight, and for
// the delete), so under load a cancelled Acquire returned with its node
// still there, blocking the lock. A mutex and a semaphore of one.
func TestCancelledAcquireLeavesNothing(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	for _, k := range lockKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			dir := "/cancelrace/" + k.name
			b, other := k.lock(t, rtest.Connect(t, cl), dir), k.lock(t, rtest.Connect(t, cl), dir)
			checkCancels(t, in, dir, b, other, 160, 500*time.Microsecond)
		})
	}
}

// TestCancelledAcquireLeavesNothingSlowLink is
// TestCancelledAcquireLeavesNothing without the luck of a loaded machine:
// the cancelled session's link adds 150 ms each way, so every round trip
// (its create's, its delete's) outlasts the 250 ms the cleanup used to
// wait after a cancellation, and the cancellations fall before, during and
// after the create.
func TestCancelledAcquireLeavesNothingSlowLink(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	for _, k := range lockKinds {
		// 350 ms each way: a round trip longer than the cleanup's probe
		// waits on a fast link (a slow link is no silent server), the
		// cancellations while the create is in flight.
		for _, lat := range []time.Duration{150 * time.Millisecond, 350 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s/%v", k.name, lat), func(t *testing.T) {
				t.Parallel()
				dir := fmt.Sprintf("/cancelrace/slow%s%d", k.name, lat.Milliseconds())
				p := serverkit.NewFaultProxy()
				t.Cleanup(p.Close) // after the session's Close
				// The default session timeout (10 s): the slow link must not
				// suspend the connection, which would rightly hand the node to
				// the cleaner.
				sb := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial))
				b, other := k.lock(t, sb, dir), k.lock(t, rtest.Connect(t, cl), dir)
				p.SetLatency(lat)
				n, step := 4, lat-10*time.Millisecond
				if lat > 300*time.Millisecond {
					n, step = 6, 50*time.Millisecond
				}
				checkCancels(t, in, dir, b, other, n, step)
			})
		}
	}
}

// lockKinds are the queue kinds whose cancelled Acquires are checked: a
// mutex and a semaphore of one.
var lockKinds = []struct {
	name string
	lock func(t *testing.T, s *zookeeper.Session, dir string) recipe.Lock
}{
	{"Mutex", func(t *testing.T, s *zookeeper.Session, dir string) recipe.Lock { return newMutex(t, s, dir) }},
	{"SemaphoreOfOne", func(t *testing.T, s *zookeeper.Session, dir string) recipe.Lock {
		m, err := mutex.NewSemaphore(s, dir, 1)
		if err != nil {
			t.Fatalf("NewSemaphore: %v", err)
		}
		return m
	}},
}

// checkCancels makes n Acquires of b on the free lock at dir, the i-th
// cancelled after (i%16)*step; after each cancelled one the directory must
// be empty and other's TryAcquire must get the lock (released at once).
func checkCancels(t *testing.T, in *zktest.Inspector, dir string, b, other recipe.Lock, n int, step time.Duration) {
	t.Helper()
	cancelled := 0
	for i := range n {
		after := time.Duration(i%16) * step
		err := cancelOnce(t, b, after)
		if err == nil {
			continue
		}
		cancelled++
		if !errors.Is(err, errGaveUp) {
			t.Fatalf("attempt %d: Acquire: %v, want the cancellation's cause", i, err)
		}
		if left := in.Children(dir); len(left) != 0 {
			t.Fatalf("attempt %d (cancelled after %v): Acquire returned with %d node(s) left: %v", i, after, len(left), left)
		}
		l, err := other.TryAcquire(context.Background())
		if err != nil {
			t.Fatalf("attempt %d (cancelled after %v): another session's TryAcquire: %v", i, after, err)
		}
		release(t, l)
	}
	if cancelled == 0 {
		t.Fatal("no Acquire was cancelled: the test checked nothing")
	}
	t.Logf("%d of %d Acquires cancelled, none left a node", cancelled, n)
}

// cancelOnce runs one Acquire of l cancelled (cause errGaveUp) after d; a
// granted lease is released. It returns Acquire's error.
func cancelOnce(t *testing.T, l recipe.Lock, d time.Duration) error {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	tm := time.AfterFunc(d, func() { cancel(errGaveUp) })
	defer tm.Stop()
	lease, err := l.Acquire(ctx)
	if err == nil {
		release(t, lease)
	}
	return err
}
