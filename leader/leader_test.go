package leader_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/leadtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// TestZooKeeper runs the leader-loop scenario (testkit/leadtest) on
// ZooKeeper mutexes, each candidate on its own session behind its own fault
// proxy. (backend/memlock and the backend modules run it on theirs.)
func TestZooKeeper(t *testing.T) {
	cl := zktest.Shared(t)
	leadtest.Run(t, &rtest.LockHarness{Cluster: cl, In: zktest.Inspect(t, cl),
		Lock: func(tb testing.TB, s *zookeeper.Session, dir string) recipe.Lock {
			m, err := mutex.New(s, dir)
			if err != nil {
				tb.Fatal(err)
			}
			return m
		}})
}

// quiet discards the loops' warnings where a test provokes them.
var quiet = leader.WithLogger(slog.New(slog.DiscardHandler))

// memLock returns a lock on a Session of its own of a Server of the test's
// own, and the Server.
func memLock(t *testing.T) (*memlock.Mutex, *memlock.Server) {
	t.Helper()
	srv, err := memlock.NewServer(memlock.WithTTL(300 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	s := srv.Connect()
	t.Cleanup(func() { s.Close() })
	m, err := memlock.New(s, "job")
	if err != nil {
		t.Fatal(err)
	}
	return m, srv
}

func TestBadArguments(t *testing.T) {
	m, _ := memLock(t)
	fn := func(context.Context, fence.Token) error { return nil }
	if err := leader.Run(context.Background(), nil, fn); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("Run(nil lock) = %v, want recipe.ErrBadOption", err)
	}
	if err := leader.Run(context.Background(), m, nil); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("Run(nil fn) = %v, want recipe.ErrBadOption", err)
	}
	// A typed nil, whose methods would panic, and InEra around a nil lock
	// (refused by its Acquire, which Run takes as permanent).
	var typed *memlock.Mutex
	for name, l := range map[string]recipe.Lock{"typed nil": typed, "InEra(nil, 1)": recipe.InEra(nil, 1), "InEra(typed nil, 1)": recipe.InEra(typed, 1)} {
		if err := leader.Run(context.Background(), l, fn, quiet); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("Run(%s) = %v, want recipe.ErrBadOption", name, err)
		}
	}
}

// TestStopReturnsCause: ending ctx stops Run with ctx's cause, after fn saw
// it and returned and the lease was released; a ctx done before Run
// acquires nothing.
func TestStopReturnsCause(t *testing.T) {
	m, srv := memLock(t)
	stopped := errors.New("stopped by the test")
	ctx, stop := context.WithCancelCause(context.Background())
	var fnCause error
	err := leader.Run(ctx, m, func(ctx context.Context, token fence.Token) error {
		if n := srv.Entries("job"); n != 1 {
			t.Errorf("%d entries while leading, want 1", n)
		}
		stop(stopped)
		<-ctx.Done()
		fnCause = context.Cause(ctx)
		return nil
	})
	if !errors.Is(err, stopped) || !errors.Is(fnCause, stopped) {
		t.Errorf("Run = %v, fn's cause %v; want both the stop's cause", err, fnCause)
	}
	if n := srv.Entries("job"); n != 0 {
		t.Errorf("%d entries after Run returned, want 0", n)
	}

	err = leader.Run(ctx, m, func(context.Context, fence.Token) error {
		t.Error("fn ran on a done ctx")
		return nil
	})
	if !errors.Is(err, stopped) {
		t.Errorf("Run on a done ctx = %v, want its cause", err)
	}
	dctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = leader.Run(dctx, m, func(ctx context.Context, _ fence.Token) error { <-ctx.Done(); return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run past its deadline = %v, want context.DeadlineExceeded", err)
	}
}

// failingLock fails its first n Acquires with err, then is lock.
type failingLock struct {
	recipe.Lock
	mu  sync.Mutex
	n   int
	err error
}

func (f *failingLock) Acquire(ctx context.Context) (recipe.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n > 0 {
		f.n--
		return nil, f.err
	}
	return f.Lock.Acquire(ctx)
}

// TestPermanentErrorsEnd: an Acquire error that retrying cannot cure ends
// Run with that error (recipe.Permanent, or WithPermanent's; another
// recipe's nodes once confirmed); another one is retried.
func TestPermanentErrorsEnd(t *testing.T) {
	ctx := context.Background()
	fn := func(context.Context, fence.Token) error { return nil }

	m, _ := memLock(t)
	own := errors.New("the caller's own permanent error")
	f := &failingLock{Lock: m, n: 1, err: own}
	if err := leader.Run(ctx, f, fn, quiet, leader.WithPermanent(own)); !errors.Is(err, own) {
		t.Errorf("Run with WithPermanent = %v, want the error", err)
	}

	srv, err := memlock.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sess := srv.Connect()
	closed, _ := memlock.New(sess, "job")
	sess.Close()
	if err := leader.Run(ctx, closed, fn, quiet); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("Run on a closed session = %v, want recipe.ErrSessionClosed", err)
	}

	// A transient error is retried: the loop goes on to lead.
	m2, _ := memLock(t)
	led := make(chan struct{})
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	f2 := &failingLock{Lock: m2, n: 2, err: recipe.ErrSessionLost}
	err = leader.Run(rctx, f2, func(context.Context, fence.Token) error { close(led); stop(); return nil },
		quiet, leader.WithBackOff(func() backoff.BackOff { return &backoff.ZeroBackOff{} }))
	select {
	case <-led:
	default:
		t.Errorf("Run did not lead after two transient errors: %v", err)
	}

	// recipe.ErrMixedRecipes ends Run only when the next Acquire meets it
	// too (loop.Stopper): once, the loop goes on to lead; twice in a
	// row, it ends.
	zero := leader.WithBackOff(func() backoff.BackOff { return &backoff.ZeroBackOff{} })
	m3, _ := memLock(t)
	led3 := false
	rctx3, stop3 := context.WithCancel(ctx)
	defer stop3()
	f3 := &failingLock{Lock: m3, n: 1, err: recipe.ErrMixedRecipes}
	err = leader.Run(rctx3, f3, func(context.Context, fence.Token) error { led3 = true; stop3(); return nil }, quiet, zero)
	if !led3 {
		t.Errorf("Run did not lead after recipe.ErrMixedRecipes once: %v", err)
	}
	m4, _ := memLock(t)
	f4 := &failingLock{Lock: m4, n: 2, err: recipe.ErrMixedRecipes}
	if err := leader.Run(ctx, f4, fn, quiet, zero); !errors.Is(err, recipe.ErrMixedRecipes) || f4.n != 0 {
		t.Errorf("Run after recipe.ErrMixedRecipes twice = %v (%d failures left), want the error after both", err, f4.n)
	}
}

// recorder is a backoff policy that records how Run uses it.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) NextBackOff() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "next")
	return time.Millisecond
}

func (r *recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "reset")
}

// TestBackOff: the backoff grows after a failed acquisition and after fn
// failed while leading, and is reset after a leadership that ended
// otherwise: fn returned nil while leading (Requeue: its pause, then at
// once, no backoff; RequeueWithBackOff: the backoff's first interval), or
// fn's context ended (the backoff's first interval).
func TestBackOff(t *testing.T) {
	for _, tc := range []struct {
		name     string
		onReturn leader.OnReturn
		want     []string
	}{
		// failed Acquire, failed fn, fn returned nil (reset; a wait or not), stop
		{"Requeue", leader.Requeue(0), []string{"next", "next", "reset", "reset", "next"}},
		{"RequeueWithBackOff", leader.RequeueWithBackOff(), []string{"next", "next", "reset", "next", "reset", "next"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := memLock(t)
			f := &failingLock{Lock: m, n: 1, err: recipe.ErrSessionLost}
			r := &recorder{}
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			round := 0
			_ = leader.Run(ctx, f, func(context.Context, fence.Token) error {
				round++
				switch round {
				case 1:
					return errors.New("fn failed while leading")
				case 2:
					return nil
				}
				stop()
				return nil
			}, quiet, leader.WithBackOff(func() backoff.BackOff { return r }), leader.WithOnReturn(tc.onReturn))
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.calls) < len(tc.want) || !equal(r.calls[:len(tc.want)], tc.want) {
				t.Errorf("backoff calls %v, want %v first", r.calls, tc.want)
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPanicReleases: a panic of fn goes on up after the lease was released.
func TestPanicReleases(t *testing.T) {
	m, srv := memLock(t)
	var lctx context.Context
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want fn's panic", r)
			}
		}()
		_ = leader.Run(context.Background(), m, func(ctx context.Context, _ fence.Token) error {
			lctx = ctx
			panic("boom")
		})
	}()
	if cause := context.Cause(lctx); cause != recipe.ErrReleased {
		t.Errorf("fn's context cause %v after the panic, want recipe.ErrReleased", cause)
	}
	if n := srv.Entries("job"); n != 0 {
		t.Errorf("%d entries after the panic, want 0", n)
	}
}

// TestZooKeeperHealth runs the health scenario (leadtest.Health) on
// ZooKeeper mutexes: a leader whose function outlives its lease is
// reported unhealthy within the tolerance.
func TestZooKeeperHealth(t *testing.T) {
	cl := zktest.Shared(t)
	leadtest.Health(t, &rtest.LockHarness{Cluster: cl, In: zktest.Inspect(t, cl),
		Lock: func(tb testing.TB, s *zookeeper.Session, dir string) recipe.Lock {
			m, err := mutex.New(s, dir)
			if err != nil {
				tb.Fatal(err)
			}
			return m
		}})
}
