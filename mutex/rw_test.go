package mutex_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

const rwDir = "/locks/rw"

func newRW(t testing.TB, s *zookeeper.Session) *mutex.RWMutex {
	t.Helper()
	rw, err := mutex.NewRW(s, rwDir)
	if err != nil {
		t.Fatalf("NewRW: %v", err)
	}
	return rw
}

// occupancy counts the holders of a lock as the test's workers see them,
// and a sampler checks an invariant on it continuously (every few
// hundred microseconds) as well as at every change.
type occupancy struct {
	readers, writers atomic.Int32
	violations       atomic.Int32
	first            atomic.Value // string: the first violation seen
	check            func(readers, writers int32) string
	stop             chan struct{}
	done             sync.WaitGroup
}

func sample(t *testing.T, check func(readers, writers int32) string) *occupancy {
	o := &occupancy{check: check, stop: make(chan struct{})}
	o.done.Add(1)
	go func() {
		defer o.done.Done()
		for {
			select {
			case <-o.stop:
				return
			default:
			}
			o.verify()
			time.Sleep(200 * time.Microsecond)
		}
	}()
	t.Cleanup(o.finish)
	return o
}

func (o *occupancy) verify() {
	if msg := o.check(o.readers.Load(), o.writers.Load()); msg != "" {
		o.violations.Add(1)
		o.first.CompareAndSwap(nil, msg)
	}
}

func (o *occupancy) enter(c *atomic.Int32) { c.Add(1); o.verify() }
func (o *occupancy) leave(c *atomic.Int32) { o.verify(); c.Add(-1) }

func (o *occupancy) finish() {
	select {
	case <-o.stop:
	default:
		close(o.stop)
	}
	o.done.Wait()
}

func (o *occupancy) assert(t *testing.T) {
	t.Helper()
	o.finish()
	if n := o.violations.Load(); n != 0 {
		t.Fatalf("%d invariant violations; first: %v", n, o.first.Load())
	}
}

// TestRWInvariantUnderContention: 8 sessions, readers and writers mixed;
// never two writers, never a reader during a write, sampled continuously;
// write tokens accepted by a fence in increasing order; nothing left.
func TestRWInvariantUnderContention(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	occ := sample(t, func(r, w int32) string {
		if w > 1 || (w == 1 && r > 0) {
			return "readers/writers overlap"
		}
		return ""
	})
	var guard fence.Guard
	var wg sync.WaitGroup
	var reads, writes atomic.Int32
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		rw := newRW(t, rtest.Connect(t, cl))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 12; j++ {
				writer := (i+j)%3 == 0
				side, ctr := rw.ReadLock(), &occ.readers
				if writer {
					side, ctr = rw.WriteLock(), &occ.writers
				}
				l, err := side.Acquire(context.Background())
				if err != nil {
					errs <- err
					return
				}
				occ.enter(ctr)
				if writer {
					writes.Add(1)
					if err := guard.Do("data", l.Token(), func() error { return nil }); err != nil {
						errs <- err
					}
				} else {
					reads.Add(1)
				}
				time.Sleep(time.Millisecond)
				occ.leave(ctr)
				if err := l.Release(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	occ.assert(t)
	if reads.Load() == 0 || writes.Load() == 0 {
		t.Fatalf("reads %d, writes %d: both sides must have run", reads.Load(), writes.Load())
	}
	if n := in.Children(rwDir); len(n) != 0 {
		t.Fatalf("left behind: %v", n)
	}
}

// TestRWReadersShareAndWriterIsNotStarved: two readers hold together; a
// writer queues; a reader arriving after the writer waits behind it (a
// stream of readers never starves a queued writer).
func TestRWReadersShareAndWriterIsNotStarved(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	r1, err := newRW(t, rtest.Connect(t, cl)).ReadLock().Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r2, err := newRW(t, rtest.Connect(t, cl)).ReadLock().TryAcquire(ctx)
	if err != nil {
		t.Fatalf("a second reader must share the lock: %v", err)
	}
	w := acquireAsync(context.Background(), newRW(t, rtest.Connect(t, cl)).WriteLock())
	serverkit.Eventually(t, 10*time.Second, "writer queued", func() bool { return len(in.Children(rwDir)) == 3 })
	late := newRW(t, rtest.Connect(t, cl))
	if _, err := late.ReadLock().TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("reader behind a queued writer: TryAcquire = %v, want ErrLocked", err)
	}
	r3 := acquireAsync(context.Background(), late.ReadLock())
	release(t, r1)
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-w:
		t.Fatalf("writer acquired while a reader still holds: %v", r.Err)
	case r := <-r3:
		t.Fatalf("late reader overtook the queued writer: %v", r.Err)
	default:
	}
	release(t, r2)
	wr := rtest.Await(t, w, 10*time.Second)
	if wr.Err != nil {
		t.Fatal(wr.Err)
	}
	select {
	case r := <-r3:
		t.Fatalf("reader acquired during a write: %v", r.Err)
	case <-time.After(200 * time.Millisecond):
	}
	release(t, wr.Lease)
	rr := rtest.Await(t, r3, 10*time.Second)
	if rr.Err != nil {
		t.Fatal(rr.Err)
	}
	if rr.Lease.Token() <= wr.Lease.Token() {
		t.Fatalf("read after write has token %v <= %v", rr.Lease.Token(), wr.Lease.Token())
	}
	release(t, rr.Lease)
}

// TestC13_DowngradeKeepsTheWritersPlace: A holds write, B queues for write,
// A downgrades and releases write: B waits until A releases read, and a
// reader arriving meanwhile queues behind B.
func TestC13_DowngradeKeepsTheWritersPlace(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	a := newRW(t, rtest.Connect(t, cl))
	aw, err := a.WriteLock().Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b := acquireAsync(context.Background(), newRW(t, rtest.Connect(t, cl)).WriteLock())
	serverkit.Eventually(t, 10*time.Second, "B queued", func() bool { return len(in.Children(rwDir)) == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ar, err := a.Downgrade(ctx, aw)
	if err != nil {
		t.Fatalf("Downgrade: %v", err)
	}
	if ar.Token() != aw.Token() {
		t.Fatalf("the downgraded read's token %v is not the write's %v: it takes the writer's place", ar.Token(), aw.Token())
	}
	release(t, aw)
	c := acquireAsync(context.Background(), newRW(t, rtest.Connect(t, cl)).ReadLock())
	serverkit.Eventually(t, 10*time.Second, "C queued", func() bool { return len(in.Children(rwDir)) == 3 })
	select {
	case r := <-b:
		t.Fatalf("B acquired write while A still reads (C13): %v", r.Err)
	case r := <-c:
		t.Fatalf("C overtook the queued writer: %v", r.Err)
	case <-time.After(300 * time.Millisecond):
	}
	if ar.Context().Err() != nil {
		t.Fatalf("A's read lease ended: %v", context.Cause(ar.Context()))
	}
	release(t, ar)
	br := rtest.Await(t, b, 10*time.Second)
	if br.Err != nil {
		t.Fatal(br.Err)
	}
	if br.Lease.Token() <= ar.Token() {
		t.Fatalf("B's token %v <= A's read token %v", br.Lease.Token(), ar.Token())
	}
	release(t, br.Lease)
	cr := rtest.Await(t, c, 10*time.Second)
	if cr.Err != nil {
		t.Fatal(cr.Err)
	}
	release(t, cr.Lease)
	if n := in.Children(rwDir); len(n) != 0 {
		t.Fatalf("left behind: %v", n)
	}
}

// TestDowngradeBadInput: only a live write lease of the same lock can be
// downgraded.
func TestDowngradeBadInput(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	s := rtest.Connect(t, cl)
	rw := newRW(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := rw.ReadLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Downgrade(ctx, r); !errors.Is(err, recipe.ErrBadOption) {
		t.Fatalf("downgrade of a read lease: %v, want ErrBadOption", err)
	}
	release(t, r)
	other, err := mutex.NewRW(s, "/locks/other-rw")
	if err != nil {
		t.Fatal(err)
	}
	ow, err := other.WriteLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Downgrade(ctx, ow); !errors.Is(err, recipe.ErrBadOption) {
		t.Fatalf("downgrade of another lock's lease: %v, want ErrBadOption", err)
	}
	release(t, ow)
	if _, err := other.Downgrade(ctx, ow); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Fatalf("downgrade of a released lease: %v, want ErrLeaseLost", err)
	}
	m := newMutex(t, s, rwDir)
	ml, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Downgrade(ctx, ml); !errors.Is(err, recipe.ErrBadOption) {
		t.Fatalf("downgrade of a mutex lease: %v, want ErrBadOption", err)
	}
	release(t, ml)
	if _, err := rw.Downgrade(ctx, nil); !errors.Is(err, recipe.ErrBadOption) {
		t.Fatalf("downgrade of nil: %v, want ErrBadOption", err)
	}
}

// TestRWWriterSessionExpired: the write holder is cut off past its session
// timeout; a queued reader gets the lock with a larger token, after the
// writer's lease ended.
func TestRWWriterSessionExpired(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	ws := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(time.Second))
	wl, err := newRW(t, ws).WriteLock().Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wDone := rtest.WatchDone(wl.Context())
	rc := acquireAsync(context.Background(), newRW(t, rtest.Connect(t, cl)).ReadLock())
	serverkit.Eventually(t, 10*time.Second, "reader queued", func() bool { return len(in.Children(rwDir)) == 2 })
	p.Blackhole()
	r := rtest.Await(t, rc, 20*time.Second)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if at := wDone.Get(); at.IsZero() || !at.Before(r.At) {
		t.Fatalf("writer's lease ended at %v, reader acquired at %v", at, r.At)
	}
	if r.Lease.Token() <= wl.Token() {
		t.Fatalf("reader's token %v <= writer's %v", r.Lease.Token(), wl.Token())
	}
	p.Resume()
	release(t, r.Lease)
}

// TestRWCancelLeavesNothing: a reader and a writer that give up while a
// writer holds leave no node; the holder's release then frees the lock.
func TestRWCancelLeavesNothing(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	wl, err := newRW(t, rtest.Connect(t, cl)).WriteLock().Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s := rtest.Connect(t, cl)
	rw := newRW(t, s)
	for _, side := range []*mutex.RWSide{rw.ReadLock(), rw.WriteLock()} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := side.Acquire(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire past deadline: %v", err)
		}
		if _, err := side.TryAcquire(context.Background()); !errors.Is(err, recipe.ErrLocked) {
			t.Fatalf("TryAcquire during a write: %v, want ErrLocked", err)
		}
	}
	if n := in.Owned(rwDir, s.ID()); len(n) != 0 {
		t.Fatalf("left behind: %v", n)
	}
	handOver(t, wl, rw.ReadLock())
	if n := in.Children(rwDir); len(n) != 0 {
		t.Fatalf("left behind: %v", n)
	}
}

// TestRWForeignChildrenIgnored: children that are not this package's
// nodes (Curator's read-write lock names, a stray node) take no place in
// the queue.
func TestRWForeignChildrenIgnored(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	for _, c := range []string{"_c_8d6b1c7e-3f4a-4bde-9c0a-1b2c3d4e5f60-__WRIT__0000000000", "_c_8d6b1c7e-3f4a-4bde-9c0a-1b2c3d4e5f61-__READ__0000000001", "write-0000000002", "stray"} {
		in.Create(rwDir+"/"+c, nil)
	}
	rw := newRW(t, rtest.Connect(t, cl))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := rw.WriteLock().TryAcquire(ctx)
	if err != nil {
		t.Fatalf("writer blocked by foreign children: %v", err)
	}
	release(t, w)
	r, err := rw.ReadLock().TryAcquire(ctx)
	if err != nil {
		t.Fatalf("reader blocked by foreign children: %v", err)
	}
	release(t, r)
	if n := in.Children(rwDir); len(n) != 4 {
		t.Fatalf("foreign children touched: %v", n)
	}
}
