package multilock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/multilock"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// zkMutex returns the ZooKeeper mutex at p on s.
func zkMutex(t *testing.T, s *zookeeper.Session, p string) *mutex.Mutex {
	t.Helper()
	m, err := mutex.New(s, p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func memServer(t *testing.T) *memlock.Server {
	t.Helper()
	srv, err := memlock.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func memMutex(t *testing.T, c *memlock.Session, name string) *memlock.Mutex {
	t.Helper()
	m, err := memlock.New(c, name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newMulti(t *testing.T, parts ...multilock.Part) *multilock.Lock {
	t.Helper()
	m, err := multilock.New(parts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestNewRefusesBadParts: every malformed part list is recipe.ErrBadOption.
func TestNewRefusesBadParts(t *testing.T) {
	c := memServer(t).Connect()
	defer c.Close()
	a, b := memMutex(t, c, "a"), memMutex(t, c, "b")
	var typedNil *memlock.Mutex
	for what, parts := range map[string][]multilock.Part{
		"no parts":     nil,
		"empty key":    {{Key: "", Lock: a}},
		"nil lock":     {{Key: "a", Lock: nil}},
		"typed nil":    {{Key: "a", Lock: typedNil}},
		"repeated key": {{Key: "a", Lock: a}, {Key: "a", Lock: b}},
		"one lock":     {{Key: "a", Lock: a}, {Key: "b", Lock: a}},
	} {
		if _, err := multilock.New(parts...); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("%s: %v, want ErrBadOption", what, err)
		}
	}
	m := newMulti(t, multilock.Part{Key: "z", Lock: a}, multilock.Part{Key: "b", Lock: b})
	if got := m.Keys(); fmt.Sprint(got) != "[b z]" {
		t.Fatalf("Keys = %v, want key order [b z]", got)
	}
	//lint:ignore SA1012 a nil ctx is the bad input under test
	if _, err := m.Acquire(nil); !errors.Is(err, recipe.ErrBadOption) {
		t.Fatalf("Acquire(nil) = %v", err)
	}
}

// secondHeld returns a multi-lock over ZooKeeper mutexes dir/a and dir/b
// (on one session) with b held by another session (other) until the test
// ends, and an inspector of the server.
func secondHeld(t *testing.T, dir string) (m *multilock.Lock, in *zktest.Inspector, other *zookeeper.Session, a, b string) {
	t.Helper()
	cl := zktest.Shared(t)
	in = zktest.Inspect(t, cl)
	s, other := rtest.Connect(t, cl), rtest.Connect(t, cl)
	a, b = dir+"/a", dir+"/b"
	m = newMulti(t, multilock.Part{Key: a, Lock: zkMutex(t, s, a)}, multilock.Part{Key: b, Lock: zkMutex(t, s, b)})
	held, err := zkMutex(t, other, b).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Release(context.Background()) })
	return m, in, other, a, b
}

// TestFailedAttemptReleasesWhatItTook: with the second part held
// elsewhere, TryAcquire is ErrLocked and an Acquire whose ctx ends is
// ctx's cause; neither leaves the first part's node, and both leave the
// first part free.
func TestFailedAttemptReleasesWhatItTook(t *testing.T) {
	m, in, other, a, b := secondHeld(t, "/multi/fail")
	ctx := context.Background()

	if _, err := m.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire = %v, want ErrLocked", err)
	}
	if n := in.Children(a); len(n) != 0 {
		t.Fatalf("TryAcquire left %v in %s", n, a)
	}
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := m.Acquire(tctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v, want the deadline", err)
	}
	if n := in.Children(a); len(n) != 0 {
		t.Fatalf("Acquire left %v in %s", n, a)
	}
	if n := in.Children(b); len(n) != 1 {
		t.Fatalf("%s holds %v, want the holder's node only", b, n)
	}
	got, err := zkMutex(t, other, a).TryAcquire(ctx)
	if err != nil {
		t.Fatalf("the first part is not free: %v", err)
	}
	got.Release(ctx)
}

// TestNoDeadlockAndOneHolderPerPart: clients on separate sessions take
// overlapping multi-locks over three ZooKeeper mutexes, each naming its
// parts in its own order; every attempt is granted (no deadlock), no part
// ever has two holders, and each part's tokens grow.
func TestNoDeadlockAndOneHolderPerPart(t *testing.T) {
	cl := zktest.Shared(t)
	keys := []string{"/multi/order/a", "/multi/order/b", "/multi/order/c"}
	var (
		holders [3]atomic.Int32
		mu      sync.Mutex
		last    [3]fence.Token
		wg      sync.WaitGroup
		errs    = make(chan error, 64)
	)
	const clients, rounds = 6, 15
	for c := range clients {
		s := rtest.Connect(t, cl)
		r := rand.New(rand.NewPCG(uint64(c), 7))
		// two or three parts, in a shuffled order
		idx := r.Perm(3)[:2+c%2]
		var parts []multilock.Part
		for _, i := range idx {
			parts = append(parts, multilock.Part{Key: keys[i], Lock: zkMutex(t, s, keys[i])})
		}
		m := newMulti(t, parts...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				l, err := m.Acquire(ctx)
				cancel()
				if err != nil {
					errs <- err
					return
				}
				for _, i := range idx {
					if n := holders[i].Add(1); n != 1 {
						errs <- fmt.Errorf("%s has %d holders", keys[i], n)
					}
					mu.Lock()
					if tok := l.Token(keys[i]); tok <= last[i] {
						errs <- fmt.Errorf("%s: token %d after %d", keys[i], tok, last[i])
					} else {
						last[i] = tok
					}
					mu.Unlock()
				}
				time.Sleep(time.Millisecond)
				for _, i := range idx {
					holders[i].Add(-1)
				}
				if err := l.Release(context.Background()); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPartLostEndsTheGrant: a multi-lock over a ZooKeeper mutex and a
// memlock mutex; the ZooKeeper part's node is deleted by someone else.
// The grant's Context ends with a cause naming that part and matching
// recipe.ErrNodeDeleted; Release reports the loss (ErrLeaseLost, at every
// call) and frees the other part.
func TestPartLostEndsTheGrant(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s := rtest.Connect(t, cl)
	srv := memServer(t)
	c, other := srv.Connect(), srv.Connect()
	defer c.Close()
	defer other.Close()
	const zkKey = "/multi/lost/a"
	m := newMulti(t, multilock.Part{Key: zkKey, Lock: zkMutex(t, s, zkKey)}, multilock.Part{Key: "mem:b", Lock: memMutex(t, c, "b")})
	ctx := context.Background()
	l, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token(zkKey).IsZero() || l.Token("mem:b").IsZero() || !l.Token("nope").IsZero() || l.Part("nope") != nil {
		t.Fatalf("tokens %v %v %v", l.Token(zkKey), l.Token("mem:b"), l.Token("nope"))
	}
	for _, n := range in.Children(zkKey) {
		in.Delete(zkKey + "/" + n)
	}
	select {
	case <-l.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the grant's Context did not end")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, recipe.ErrNodeDeleted) {
		t.Fatalf("cause %v, want ErrNodeDeleted", cause)
	}
	if err := l.Release(ctx); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Fatalf("Release = %v, want ErrLeaseLost", err)
	}
	if err := l.Release(ctx); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Fatalf("second Release = %v, want ErrLeaseLost again, as the part's own Release says", err)
	}
	got, err := memMutex(t, other, "b").TryAcquire(ctx)
	if err != nil {
		t.Fatalf("the other part is not free: %v", err)
	}
	got.Release(ctx)
}

// TestPartLostWhileAcquiring: a part taken is lost while the next is
// awaited; Acquire returns at once with the loss, not at ctx's end, and
// leaves nothing in either part.
func TestPartLostWhileAcquiring(t *testing.T) {
	m, in, _, a, b := secondHeld(t, "/multi/midway")
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := m.Acquire(ctx)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(in.Children(a)) == 0 || len(in.Children(b)) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the multi-lock did not take its first part and wait for the second")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, n := range in.Children(a) {
		in.Delete(a + "/" + n)
	}
	select {
	case err := <-done:
		if !errors.Is(err, recipe.ErrNodeDeleted) {
			t.Fatalf("Acquire = %v, want ErrNodeDeleted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire kept waiting with a lost part")
	}
	if n := in.Children(b); len(n) != 1 {
		t.Fatalf("%s holds %v, want the holder's node only", b, n)
	}
}

// TestPartCrashedWhileAwaiting: the session of a part taken crashes while
// the next part is awaited: Acquire returns at once with that loss
// (recipe.ErrSessionClosed, not recipe.ErrLeaseLost: the lost part left
// nothing to remove), and the awaited part's queue keeps its holder only.
func TestPartCrashedWhileAwaiting(t *testing.T) {
	srv := memServer(t)
	sa, sb, other := srv.Connect(), srv.Connect(), srv.Connect()
	defer sb.Close()
	defer other.Close()
	m := newMulti(t, multilock.Part{Key: "a", Lock: memMutex(t, sa, "a")}, multilock.Part{Key: "b", Lock: memMutex(t, sb, "b")})
	held, err := memMutex(t, other, "b").Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	done := make(chan error, 1)
	go func() { _, err := m.Acquire(context.Background()); done <- err }()
	for srv.Entries("b") < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	sa.Crash()
	select {
	case err := <-done:
		if !errors.Is(err, recipe.ErrSessionClosed) || errors.Is(err, recipe.ErrLeaseLost) {
			t.Fatalf("Acquire = %v, want ErrSessionClosed and not ErrLeaseLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire kept waiting with a lost part")
	}
	serverkit.Eventually(t, 5*time.Second, "b's queue back to its holder", func() bool { return srv.Entries("b") == 1 })
}

// endedLock grants leases that are already over when Acquire returns: a
// part lost between its grant and the multi-lock's look at it.
type endedLock struct{ recipe.Lock }

func (e endedLock) Acquire(ctx context.Context) (recipe.Lease, error) {
	l, err := e.Lock.Acquire(ctx)
	if err == nil {
		l.Release(context.Background())
	}
	return l, err
}

// TestPartOverWhenTaken: a part whose lease is over when its Acquire
// returns fails the attempt; no grant is returned.
func TestPartOverWhenTaken(t *testing.T) {
	c := memServer(t).Connect()
	defer c.Close()
	m := newMulti(t, multilock.Part{Key: "a", Lock: endedLock{memMutex(t, c, "a")}}, multilock.Part{Key: "b", Lock: memMutex(t, c, "b")})
	for range 50 {
		if l, err := m.Acquire(context.Background()); err == nil || !errors.Is(err, recipe.ErrReleased) {
			t.Fatalf("Acquire = %v, %v; want the part's end", l, err)
		}
	}
}

// TestNewComparesOnlyPointers: locks of kinds == cannot compare (a struct
// holding a func) are taken as they are, without a panic.
func TestNewComparesOnlyPointers(t *testing.T) {
	c := memServer(t).Connect()
	defer c.Close()
	type funcLock struct {
		recipe.Lock
		f func()
	}
	type wrapped struct{ recipe.Lock }
	a, b := memMutex(t, c, "a"), memMutex(t, c, "b")
	if _, err := multilock.New(multilock.Part{Key: "a", Lock: wrapped{funcLock{a, nil}}}, multilock.Part{Key: "b", Lock: wrapped{funcLock{b, nil}}}); err != nil {
		t.Fatal(err)
	}
	// Two pointers to zero-size values may be equal: not one lock.
	if _, err := multilock.New(multilock.Part{Key: "a", Lock: &zeroLock{}}, multilock.Part{Key: "b", Lock: &zeroLock{}}); err != nil {
		t.Fatalf("two zero-size locks: %v", err)
	}
}

// zeroLock is a lock of zero size (a stateless stub).
type zeroLock struct{}

func (*zeroLock) Acquire(context.Context) (recipe.Lease, error)    { return nil, recipe.ErrLocked }
func (*zeroLock) TryAcquire(context.Context) (recipe.Lease, error) { return nil, recipe.ErrLocked }
