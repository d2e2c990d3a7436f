package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

const storedDir = "/locks/stored"

// storedSem is NewSemaphore(s, p, n, StoredLimit()) or fails the test.
func storedSem(t testing.TB, s *zookeeper.Session, p string, n int) *mutex.Semaphore {
	t.Helper()
	sem, err := mutex.NewSemaphore(s, p, n, mutex.StoredLimit())
	if err != nil {
		t.Fatalf("NewSemaphore(%q, %d, StoredLimit()): %v", p, n, err)
	}
	return sem
}

// openSem is OpenSemaphore(s, p) or fails the test.
func openSem(t testing.TB, s *zookeeper.Session, p string) *mutex.Semaphore {
	t.Helper()
	sem, err := mutex.OpenSemaphore(s, p)
	if err != nil {
		t.Fatalf("OpenSemaphore(%q): %v", p, err)
	}
	return sem
}

// dirData returns the data of p (below cl's chroot).
func dirData(t testing.TB, in *zktest.Inspector, cl *zktest.Cluster, p string) string {
	t.Helper()
	data, _, err := in.Conn().Get(cl.Chroot() + p)
	if err != nil {
		t.Fatalf("get %s: %v", p, err)
	}
	return string(data)
}

// setLimit is SetSemaphoreLimit on a Session of its own, or fails the test.
func setLimit(t testing.TB, cl *zktest.Cluster, p string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mutex.SetSemaphoreLimit(ctx, rtest.Connect(t, cl), p, n); err != nil {
		t.Fatalf("SetSemaphoreLimit(%d): %v", n, err)
	}
}

// isMismatch checks err is ErrLimitMismatch, permanent for the loops.
func isMismatch(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, mutex.ErrLimitMismatch) || !errors.Is(err, recipe.ErrBadOption) || !recipe.Permanent(err) {
		t.Fatalf("%s: %v, want ErrLimitMismatch (and ErrBadOption)", what, err)
	}
}

// TestStoredLimitMismatch: the first contender stores its n; one with
// another n is refused (Acquire and TryAcquire) and leaves no node; an
// OpenSemaphore takes the stored n.
func TestStoredLimitMismatch(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	ctx := context.Background()
	a, err := storedSem(t, rtest.Connect(t, cl), storedDir, 2).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := dirData(t, in, cl, storedDir); d != "limit 2" {
		t.Fatalf("stored %q, want %q", d, "limit 2")
	}
	b := storedSem(t, rtest.Connect(t, cl), storedDir, 3)
	_, err = b.Acquire(ctx)
	isMismatch(t, "Acquire with n=3", err)
	_, err = b.TryAcquire(ctx)
	isMismatch(t, "TryAcquire with n=3", err)
	if n := in.Children(storedDir); len(n) != 1 {
		t.Fatalf("nodes after the refusals: %v", n)
	}
	o := openSem(t, rtest.Connect(t, cl), storedDir)
	l, err := o.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.Leases() != 2 {
		t.Fatalf("OpenSemaphore's Leases %d, want 2", o.Leases())
	}
	release(t, a)
	release(t, l)
	if n := in.Children(storedDir); len(n) != 0 {
		t.Fatalf("left behind: %v", n)
	}
}

// TestStoredLimitFirstUseRace: contenders with n = 1..4 take a fresh
// semaphore at the same moment: exactly one n is stored, its contender
// holds, every other is refused with ErrLimitMismatch and leaves no node.
func TestStoredLimitFirstUseRace(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	sessions := make([]*zookeeper.Session, 4)
	for i := range sessions {
		sessions[i] = rtest.Connect(t, cl)
	}
	for round := range 5 {
		p := fmt.Sprintf("/locks/first%d", round)
		start := make(chan struct{})
		results := make([]rtest.Result, len(sessions))
		var wg sync.WaitGroup
		for i, s := range sessions {
			sem := storedSem(t, s, p, i+1)
			wg.Go(func() {
				<-start
				results[i].Lease, results[i].Err = sem.TryAcquire(context.Background())
			})
		}
		close(start)
		wg.Wait()
		var m int
		if _, err := fmt.Sscanf(dirData(t, in, cl, p), "limit %d", &m); err != nil {
			t.Fatalf("round %d: stored %q", round, dirData(t, in, cl, p))
		}
		for i, r := range results {
			if i+1 == m {
				if r.Err != nil {
					t.Fatalf("round %d: the contender of the stored n=%d: %v", round, m, r.Err)
				}
				release(t, r.Lease)
				continue
			}
			isMismatch(t, fmt.Sprintf("round %d, n=%d (stored %d)", round, i+1, m), r.Err)
		}
		if n := in.Children(p); len(n) != 0 {
			t.Fatalf("round %d: left behind: %v", round, n)
		}
	}
}

// TestStoredLimitChange: SetSemaphoreLimit growing the limit wakes the
// waiters and lets more in, and fails a waiter of another fixed n (its
// node deleted); lowering it revokes nobody, and admits no one until the
// holders are fewer than the new limit.
func TestStoredLimitChange(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	ctx := context.Background()
	setLimit(t, cl, storedDir, 1)
	h1, err := openSem(t, rtest.Connect(t, cl), storedDir).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fixed := acquireAsync(ctx, storedSem(t, rtest.Connect(t, cl), storedDir, 1))
	serverkit.Eventually(t, 10*time.Second, "fixed queued", func() bool { return len(in.Children(storedDir)) == 2 })
	w := []<-chan rtest.Result{
		acquireAsync(ctx, openSem(t, rtest.Connect(t, cl), storedDir)),
		acquireAsync(ctx, openSem(t, rtest.Connect(t, cl), storedDir)),
	}
	serverkit.Eventually(t, 10*time.Second, "waiters queued", func() bool { return len(in.Children(storedDir)) == 4 })

	setLimit(t, cl, storedDir, 2)
	isMismatch(t, "the waiter of n=1 after the limit became 2", rtest.Await(t, fixed, 10*time.Second).Err)
	var h2 rtest.Result
	select {
	case h2 = <-w[0]:
		w = w[1:]
	case h2 = <-w[1]:
		w = w[:1]
	case <-time.After(10 * time.Second):
		t.Fatal("no waiter let in by the limit of 2")
	}
	if h2.Err != nil {
		t.Fatal(h2.Err)
	}
	if n := in.Children(storedDir); len(n) != 3 {
		t.Fatalf("after the limit of 2: %v, want the 2 holders and 1 waiter", n)
	}
	setLimit(t, cl, storedDir, 3)
	h3 := rtest.Await(t, w[0], 10*time.Second)
	if h3.Err != nil {
		t.Fatal(h3.Err)
	}

	// Lowered to 1: the 3 holders keep their leases; nobody else gets in
	// until they are gone.
	setLimit(t, cl, storedDir, 1)
	probe := openSem(t, rtest.Connect(t, cl), storedDir)
	for _, l := range []recipe.Lease{h1, h2.Lease, h3.Lease} {
		if l.Context().Err() != nil {
			t.Fatalf("a holder lost its lease to the lower limit: %v", context.Cause(l.Context()))
		}
	}
	tryLocked := func(what string) {
		t.Helper()
		if _, err := probe.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
			t.Fatalf("%s: TryAcquire: %v, want ErrLocked", what, err)
		}
	}
	tryLocked("3 holders, limit 1")
	release(t, h1)
	release(t, h2.Lease)
	tryLocked("1 holder, limit 1")
	release(t, h3.Lease)
	l, err := probe.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire with no holder: %v", err)
	}
	if probe.Leases() != 1 {
		t.Fatalf("Leases %d, want 1", probe.Leases())
	}
	release(t, l)
	if n := in.Children(storedDir); len(n) != 0 {
		t.Fatalf("left behind: %v", n)
	}
}

// TestStoredLimitBadData: data that is not a limit (planted before, or
// written while a contender waits) is ErrBadLimit for every contender and
// for SetSemaphoreLimit, which leaves it; no node is left. Bad arguments
// are refused before anything is sent.
func TestStoredLimitBadData(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s := rtest.Connect(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bad := []string{"limit 0", "limit -1", "limit 03", "limit +3", "limit 16385", "limit 99999999999999999999",
		"LIMIT 3", "limit 3\n", " limit 3", "limit3", "limit ", "limit 3 4", "\xff\xfe", strings.Repeat("x", 5000)}
	for i, data := range bad {
		p := fmt.Sprintf("/locks/bad%d", i)
		in.Create(p, nil)
		if _, err := in.Conn().Set(cl.Chroot()+p, []byte(data), -1); err != nil {
			t.Fatal(err)
		}
		for what, sem := range map[string]*mutex.Semaphore{"stored": storedSem(t, s, p, 3), "open": openSem(t, s, p)} {
			if _, err := sem.Acquire(ctx); !errors.Is(err, mutex.ErrBadLimit) || !errors.Is(err, recipe.ErrBadOption) {
				t.Fatalf("%q, %s semaphore: %v, want ErrBadLimit", data, what, err)
			}
		}
		if err := mutex.SetSemaphoreLimit(ctx, s, p, 3); !errors.Is(err, mutex.ErrBadLimit) {
			t.Fatalf("%q, SetSemaphoreLimit: %v, want ErrBadLimit", data, err)
		}
		if got := dirData(t, in, cl, p); got != data || len(in.Children(p)) != 0 {
			t.Fatalf("%q: after the refusals, data %q and nodes %v", data, got, in.Children(p))
		}
	}
	if _, err := openSem(t, s, "/locks/none").Acquire(ctx); !errors.Is(err, mutex.ErrBadLimit) {
		t.Fatalf("OpenSemaphore with no limit stored: %v", err)
	}
	for _, n := range []int{0, -1, mutex.MaxLimit + 1} {
		if _, err := mutex.NewSemaphore(s, storedDir, n, mutex.StoredLimit()); !errors.Is(err, recipe.ErrBadOption) {
			t.Fatalf("NewSemaphore(n=%d, StoredLimit): %v", n, err)
		}
		if err := mutex.SetSemaphoreLimit(ctx, s, storedDir, n); !errors.Is(err, recipe.ErrBadOption) {
			t.Fatalf("SetSemaphoreLimit(%d): %v", n, err)
		}
	}
	for _, p := range []string{"locks/rel", "/locks/x/", "/zookeeper/x"} {
		_, err1 := mutex.NewSemaphore(s, p, 2, mutex.StoredLimit())
		_, err2 := mutex.OpenSemaphore(s, p)
		err3 := mutex.SetSemaphoreLimit(ctx, s, p, 2)
		for _, err := range []error{err1, err2, err3} {
			if !errors.Is(err, recipe.ErrInvalidPath) {
				t.Fatalf("path %q: %v, want ErrInvalidPath", p, err)
			}
		}
	}

	// Written while a contender waits: it wakes on the data and fails.
	setLimit(t, cl, storedDir, 1)
	h, err := storedSem(t, rtest.Connect(t, cl), storedDir, 1).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiter := acquireAsync(ctx, storedSem(t, rtest.Connect(t, cl), storedDir, 1))
	serverkit.Eventually(t, 10*time.Second, "waiter queued", func() bool { return len(in.Children(storedDir)) == 2 })
	if _, err := in.Conn().Set(cl.Chroot()+storedDir, []byte("limit two"), -1); err != nil {
		t.Fatal(err)
	}
	if r := rtest.Await(t, waiter, 10*time.Second); !errors.Is(r.Err, mutex.ErrBadLimit) {
		t.Fatalf("waiter after hostile data: %v, want ErrBadLimit", r.Err)
	}
	if n := in.Children(storedDir); len(n) != 1 || h.Context().Err() != nil {
		t.Fatalf("after the waiter's refusal: nodes %v, holder's context %v", n, h.Context().Err())
	}
	release(t, h)
}

// TestStoredLimitWaiterSessionLost: a waiter whose session expires returns
// the loss; its node goes with the session; the holder keeps its lease and
// the semaphore works on.
func TestStoredLimitWaiterSessionLost(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	ctx := context.Background()
	h, err := storedSem(t, rtest.Connect(t, cl), storedDir, 1).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sw, _, tap := proxied(t, cl)
	waiter := acquireAsync(ctx, storedSem(t, sw, storedDir, 1))
	serverkit.Eventually(t, 10*time.Second, "waiter queued", func() bool { return len(in.Children(storedDir)) == 2 })
	id, pw, ok := tap.Session()
	if !ok {
		t.Fatal("no session seen by the tap")
	}
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := zktest.ExpireSession(ectx, cl.Addrs(), id, pw); err != nil {
		t.Fatal(err)
	}
	if r := rtest.Await(t, waiter, 10*time.Second); !errors.Is(r.Err, recipe.ErrSessionLost) {
		t.Fatalf("waiter after its session expired: %v, want ErrSessionLost", r.Err)
	}
	if n := in.Children(storedDir); len(n) != 1 || h.Context().Err() != nil {
		t.Fatalf("after the expiry: nodes %v, holder's context %v", n, h.Context().Err())
	}
	handOver(t, h, storedSem(t, rtest.Connect(t, cl), storedDir, 1))
	if n := in.Children(storedDir); len(n) != 0 {
		t.Fatalf("left behind: %v", n)
	}
}

// TestStoredLimitBound: 6 sessions, half with StoredLimit n=3, half
// OpenSemaphore, acquire and release at random; never more than 3 holders,
// sampled continuously, and more than one at some point.
func TestStoredLimitBound(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	const limit = 3
	setLimit(t, cl, storedDir, limit)
	occ := sample(t, func(r, _ int32) string {
		if r > limit {
			return fmt.Sprintf("%d holders of a limit of %d", r, limit)
		}
		return ""
	})
	var peak atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		s := rtest.Connect(t, cl)
		sem := storedSem(t, s, storedDir, limit)
		if i%2 == 1 {
			sem = openSem(t, s, storedDir)
		}
		wg.Go(func() {
			for j := range 10 {
				l, err := sem.Acquire(context.Background())
				if err != nil {
					errs <- err
					return
				}
				occ.enter(&occ.readers)
				if n := occ.readers.Load(); n > peak.Load() {
					peak.Store(n)
				}
				time.Sleep(time.Duration(1+(i*j)%3) * time.Millisecond)
				occ.leave(&occ.readers)
				if err := l.Release(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	occ.assert(t)
	if peak.Load() < 2 {
		t.Fatalf("peak of %d concurrent holders: the semaphore did not share", peak.Load())
	}
	if n := in.Children(storedDir); len(n) != 0 {
		t.Fatalf("left behind: %v", n)
	}
}
