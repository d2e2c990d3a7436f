package mutex_test

import (
	"context"
	"errors"
	"log/slog"
	"path"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// The ZooKeeper-specific lock-delay tests (the shared properties are
// TestConformanceLockDelay's). An unclean end is made at once where it
// can be: Session.Close without Release (the server deletes the session's
// znodes at once), an operator's delete.

// testDelay is the delay of the tests below: long enough to tell from a
// prompt grant on a loaded machine, short enough to serve often.
const testDelay = time.Second

// delayed builds a Mutex on dir with a lock-delay of d, or fails the test.
func delayed(t testing.TB, s *zookeeper.Session, d time.Duration) *mutex.Mutex {
	t.Helper()
	m, err := mutex.New(s, dir, mutex.WithLockDelay(d))
	if err != nil {
		t.Fatalf("mutex.New(WithLockDelay(%v)): %v", d, err)
	}
	return m
}

func acquire(t testing.TB, l recipe.Lock) recipe.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := l.Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return lease
}

// markerOf reads the marker of dir through the inspector ("" and false
// when there is none).
func markerOf(t testing.TB, cl *zktest.Cluster, in *zktest.Inspector) (string, bool) {
	t.Helper()
	data, _, err := in.Conn().Get(cl.Chroot() + dir + "/" + markerName)
	if err != nil {
		return "", false
	}
	return string(data), true
}

// nodeName is the znode name of a ZooKeeper lease.
func nodeName(l recipe.Lease) string { return path.Base(l.(interface{ Path() string }).Path()) }

// expectPrompt checks a grant that must serve no delay.
func expectPrompt(t testing.TB, r rtest.Result, since time.Time, what string) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("%s: %v", what, r.Err)
	}
	if took := r.At.Sub(since); took >= testDelay {
		t.Errorf("%s: granted %v later, want at once (no lock-delay)", what, took)
	}
	if got := recipe.LockDelayServed(r.Lease); got != 0 {
		t.Errorf("%s: LockDelayServed = %v, want 0", what, got)
	}
}

// expectDelayed checks a grant that must serve the delay counted from
// lost (when the unclean end happened).
func expectDelayed(t testing.TB, r rtest.Result, lost time.Time, what string) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("%s: %v", what, r.Err)
	}
	if took := r.At.Sub(lost); took < testDelay {
		t.Errorf("%s: granted %v after the unclean end, sooner than the lock-delay %v", what, took, testDelay)
	}
	if got := recipe.LockDelayServed(r.Lease); got <= 0 || got > testDelay {
		t.Errorf("%s: LockDelayServed = %v, want in (0, %v]", what, got, testDelay)
	}
}

func TestLockDelayBadOption(t *testing.T) {
	t.Parallel()
	s := rtest.Connect(t, zktest.Shared(t))
	for _, d := range []time.Duration{-time.Nanosecond, recipe.MaxLockDelay + time.Nanosecond} {
		if _, err := mutex.New(s, dir, mutex.WithLockDelay(d)); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("New(WithLockDelay(%v)) = %v, want recipe.ErrBadOption", d, err)
		}
	}
	for _, d := range []time.Duration{0, recipe.MaxLockDelay} {
		if _, err := mutex.New(s, dir, mutex.WithLockDelay(d)); err != nil {
			t.Errorf("New(WithLockDelay(%v)): %v", d, err)
		}
	}
	if _, err := mutex.NewRW(s, dir); err != nil {
		t.Errorf("NewRW without a lock-delay: %v", err)
	}
}

// TestLockDelayMutexOnly: the read-write lock and the semaphore have no
// lock-delay, and do not compile with WithLockDelay (it was refused with
// recipe.ErrBadOption at run time): neither WithLockDelay's result type
// nor its value is assignable to their option type; New takes it, and
// every Option too.
func TestLockDelayMutexOnly(t *testing.T) {
	t.Parallel()
	delay := mutex.WithLockDelay(time.Second)
	static := reflect.TypeOf((*mutex.MutexOption)(nil)).Elem()
	for what, fn := range map[string]any{"NewRW": mutex.NewRW, "NewSemaphore": mutex.NewSemaphore} {
		ft := reflect.TypeOf(fn)
		opt := ft.In(ft.NumIn() - 1).Elem()
		if static.AssignableTo(opt) || reflect.TypeOf(delay).AssignableTo(opt) {
			t.Errorf("%s takes WithLockDelay (its options are %v)", what, opt)
		}
	}
	nt := reflect.TypeOf(mutex.New)
	if opt := nt.In(nt.NumIn() - 1).Elem(); opt != static || !reflect.TypeOf(mutex.WithData(nil)).AssignableTo(opt) {
		t.Errorf("New's options are %v, want MutexOption, which every Option is", opt)
	}
}

// TestLockDelayMarkerLifecycle: the marker names the holder from its
// grant, the next holder after a Release, and goes with the last Release
// (the directory is left empty, for the server to remove).
func TestLockDelayMarkerLifecycle(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	a, b := delayed(t, rtest.Connect(t, cl), testDelay), delayed(t, rtest.Connect(t, cl), testDelay)
	la := acquire(t, a)
	if got, ok := markerOf(t, cl, in); !ok || got != nodeName(la) {
		t.Fatalf("marker while A holds = %q (exists %v), want A's node %s", got, ok, nodeName(la))
	}
	ps, err := a.Participants(context.Background())
	if err != nil || len(ps) != 1 {
		t.Fatalf("Participants beside the marker = %v, %v: want A alone (the marker is no participant)", ps, err)
	}
	ch := acquireAsync(context.Background(), b)
	time.Sleep(200 * time.Millisecond) // B in line
	released := time.Now()
	release(t, la)
	r := rtest.Await(t, ch, 10*time.Second)
	expectPrompt(t, r, released, "B after A's Release")
	if got, _ := markerOf(t, cl, in); got != nodeName(r.Lease) {
		t.Errorf("marker while B holds = %q, want B's node %s", got, nodeName(r.Lease))
	}
	release(t, r.Lease)
	if left := in.Children(dir); len(left) != 0 {
		t.Errorf("left in the lock directory after the last Release: %q", left)
	}
}

// TestLockDelayUncleanEnds: Session.Close without Release and an
// operator's delete of the held znode are unclean ends: the waiter serves
// the delay.
func TestLockDelayUncleanEnds(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(t *testing.T, s *zookeeper.Session, in *zktest.Inspector, l recipe.Lease)
	}{
		{"SessionClose", func(_ *testing.T, s *zookeeper.Session, _ *zktest.Inspector, _ recipe.Lease) { s.Close() }},
		{"OperatorDelete", func(_ *testing.T, _ *zookeeper.Session, in *zktest.Inspector, l recipe.Lease) {
			in.Delete(l.(interface{ Path() string }).Path())
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cl := zktest.Shared(t)
			in := zktest.Inspect(t, cl)
			sa := rtest.Connect(t, cl)
			la := acquire(t, delayed(t, sa, testDelay))
			ch := acquireAsync(context.Background(), delayed(t, rtest.Connect(t, cl), testDelay))
			time.Sleep(200 * time.Millisecond) // B in line
			lost := time.Now()
			c.end(t, sa, in, la)
			r := rtest.Await(t, ch, 10*time.Second)
			expectDelayed(t, r, lost, "B after A's unclean end")
			release(t, r.Lease)
		})
	}
}

// TestLockDelayTryAcquire: with nobody waiting, the first TryAcquire after
// an unclean end starts the delay (it stamps the marker: ZooKeeper keeps
// no time of the session's end) and answers ErrLocked, leaving no znode;
// once the delay has passed, TryAcquire is granted.
func TestLockDelayTryAcquire(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	sa := rtest.Connect(t, cl)
	acquire(t, delayed(t, sa, testDelay))
	sa.Close() // unclean: no Release
	c := delayed(t, rtest.Connect(t, cl), testDelay)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := time.Now()
	var l recipe.Lease
	for tries := 0; ; tries++ {
		var err error
		if l, err = c.TryAcquire(ctx); err == nil {
			break
		}
		if !errors.Is(err, recipe.ErrLocked) {
			t.Fatalf("TryAcquire during the delay: %v, want recipe.ErrLocked", err)
		}
		if tries == 0 {
			if left := in.Children(dir); len(left) != 1 || left[0] != markerName {
				t.Errorf("after a refused TryAcquire the directory holds %q, want the marker alone", left)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if took := time.Since(first); took < testDelay {
		t.Errorf("TryAcquire granted %v after the first try, sooner than the lock-delay %v", took, testDelay)
	}
	// What this contender waited: a TryAcquire never waits (as on
	// PostgreSQL, Redis and memlock; it was d on ZooKeeper, issue 37).
	if got := recipe.LockDelayServed(l); got != 0 {
		t.Errorf("LockDelayServed = %v, want 0 (what the granted TryAcquire waited)", got)
	}
	release(t, l)
}

// TestLockDelayDefaultNeverWaits: without the option nothing is recorded
// or served, even after an unclean end; and mixed: a Mutex without the
// option ignores a marker left by one with it, which stays for the next
// holder with the option (which then serves a delay: documented).
func TestLockDelayDefaultNeverWaits(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	sa := rtest.Connect(t, cl)
	acquire(t, newMutex(t, sa, dir))
	if _, ok := markerOf(t, cl, in); ok {
		t.Errorf("a Mutex without the option wrote a marker")
	}
	ch := acquireAsync(context.Background(), newMutex(t, rtest.Connect(t, cl), dir))
	time.Sleep(200 * time.Millisecond) // B in line
	lost := time.Now()
	sa.Close()
	r := rtest.Await(t, ch, 10*time.Second)
	expectPrompt(t, r, lost, "B (no option) after A's unclean end")
	release(t, r.Lease)

	// Mixed: C (option) ends uncleanly; D (none) is granted at once; E
	// (option) serves the delay C's end left, from when it saw it.
	sc := rtest.Connect(t, cl)
	acquire(t, delayed(t, sc, testDelay))
	sc.Close()
	lost = time.Now()
	ld := acquire(t, newMutex(t, rtest.Connect(t, cl), dir))
	if took := time.Since(lost); took >= testDelay || recipe.LockDelayServed(ld) != 0 {
		t.Errorf("D (no option) granted %v after C's unclean end, serving %v: want at once, none", took, recipe.LockDelayServed(ld))
	}
	release(t, ld)
	seen := time.Now()
	r = rtest.Await(t, acquireAsync(context.Background(), delayed(t, rtest.Connect(t, cl), testDelay)), 10*time.Second)
	expectDelayed(t, r, seen, "E (option) after C's unclean end and D's clean turn")
	release(t, r.Lease)
}

// TestLockDelayPlantedChild: a child someone planted under the marker
// keeps it from being replaced or removed; the grant that cannot write its
// record fails with recipe.ErrMixedRecipes naming the marker, and leaves
// no node (the planted child is the only foreign thing left).
func TestLockDelayPlantedChild(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	a, b := delayed(t, rtest.Connect(t, cl), testDelay), delayed(t, rtest.Connect(t, cl), testDelay)
	la := acquire(t, a)
	evil := cl.Chroot() + dir + "/" + markerName + "/evil"
	if _, err := in.Conn().Create(evil, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.Conn().Delete(evil, -1)
		_ = in.Conn().Delete(cl.Chroot()+dir+"/"+markerName, -1)
	})
	release(t, la) // its multi fails on the child: the marker stays
	ctx, cancel := context.WithTimeout(context.Background(), 10*testDelay)
	defer cancel()
	l, err := b.Acquire(ctx)
	if err == nil {
		release(t, l)
		t.Fatalf("granted with a planted child under the marker")
	}
	if !errors.Is(err, recipe.ErrMixedRecipes) {
		t.Errorf("Acquire with a child planted under the marker: %v, want recipe.ErrMixedRecipes", err)
	}
	if ps, err := b.Participants(context.Background()); err != nil || len(ps) != 0 {
		t.Errorf("participants after the refusal: %v, %v; want none", ps, err)
	}
}

// TestLockDelayServingLoggedAtOnce: a contender serving the delay logs so
// as it begins, on the Session's logger, not among the lease reports the
// Session holds until its lock is released (where the line waited for the
// next release of the lock, and raced with a lease's loss report: found
// by the race detector in a CLI child on a loaded machine).
func TestLockDelayServingLoggedAtOnce(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	var mu sync.Mutex
	var logged time.Time
	h := handlerFunc(func(r slog.Record) {
		if strings.Contains(r.Message, "serving the lock-delay") {
			mu.Lock()
			logged = time.Now()
			mu.Unlock()
		}
	})
	sa := rtest.Connect(t, cl)
	acquire(t, delayed(t, sa, testDelay))
	ch := acquireAsync(context.Background(), delayed(t, rtest.Connect(t, cl, zookeeper.WithLogger(slog.New(h))), testDelay))
	time.Sleep(200 * time.Millisecond) // B in line
	sa.Close()
	r := rtest.Await(t, ch, 10*time.Second)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	defer release(t, r.Lease)
	mu.Lock()
	defer mu.Unlock()
	if logged.IsZero() || r.At.Sub(logged) < testDelay/2 {
		t.Errorf("the serving line was logged at %v, the grant at %v: want it as the %v wait began", logged, r.At, testDelay)
	}
}

// handlerFunc is a slog.Handler that passes every record to f.
type handlerFunc func(slog.Record)

func (f handlerFunc) Enabled(context.Context, slog.Level) bool { return true }

func (f handlerFunc) Handle(_ context.Context, r slog.Record) error { f(r); return nil }

func (f handlerFunc) WithAttrs([]slog.Attr) slog.Handler { return f }

func (f handlerFunc) WithGroup(string) slog.Handler { return f }
