package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

const dir = "/locks/job"

// TestMutualExclusionUnderContention: 8 sessions, each acquiring 25 times.
// Never two holders; every grant's token is larger than the previous one;
// every fenced write is accepted; nothing is left behind.
func TestMutualExclusionUnderContention(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	const workers, rounds = 8, 25
	var (
		holders  atomic.Int32
		overlaps atomic.Int32
		mu       sync.Mutex
		tokens   []fence.Token
		guard    fence.Guard
		counter  int
		wg       sync.WaitGroup
	)
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		m := newMutex(t, rtest.Connect(t, cl), dir)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				l, err := m.Acquire(context.Background())
				if err != nil {
					errs <- err
					return
				}
				if holders.Add(1) != 1 {
					overlaps.Add(1)
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				if err := guard.Do("counter", l.Token(), func() error { counter++; return nil }); err != nil {
					errs <- err
				}
				holders.Add(-1)
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
	if overlaps.Load() != 0 {
		t.Fatalf("%d overlapping holders", overlaps.Load())
	}
	if counter != workers*rounds {
		t.Fatalf("counter = %d, want %d", counter, workers*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d = %v not greater than previous %v", i, tokens[i], tokens[i-1])
		}
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("leaked znodes: %v", c)
	}
}

// TestFIFO: waiters are granted in the order they queued.
func TestFIFO(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	holder := newMutex(t, rtest.Connect(t, cl), dir)
	first, err := holder.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := 1; i <= 5; i++ {
		m := newMutex(t, rtest.Connect(t, cl), dir)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Acquire(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			l.Release(context.Background())
		}()
		serverkit.Eventually(t, 10*time.Second, "waiter queued", func() bool {
			p, err := holder.Participants(context.Background())
			return err == nil && len(p) == i+1
		})
	}
	release(t, first)
	wg.Wait()
	if fmt.Sprint(order) != "[1 2 3 4 5]" {
		t.Fatalf("grant order %v, want [1 2 3 4 5]", order)
	}
}

// TestTokensIncreaseAcrossParentRecreation: the token is the czxid, so it
// keeps growing when the lock directory is deleted and re-created.
func TestTokensIncreaseAcrossParentRecreation(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	m := newMutex(t, rtest.Connect(t, cl), dir)
	l1, err := m.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	release(t, l1)
	in.Delete(dir)
	l2, err := m.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, l2)
	if l2.Token() <= l1.Token() {
		t.Fatalf("token after re-creation %v <= %v", l2.Token(), l1.Token())
	}
	if in.Stat(dir) == nil {
		t.Fatal("directory was not re-created")
	}
}

// TestParticipantsAndLeaseContext: Participants lists holder first with its
// token and session; the lease context ends with ErrReleased on Release;
// Release is idempotent.
func TestParticipantsAndLeaseContext(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	s := rtest.Connect(t, cl)
	m, err := mutex.New(s, dir, mutex.WithData([]byte("worker-1")))
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Participants(context.Background())
	if err != nil || len(p) != 0 {
		t.Fatalf("participants of a missing directory: %v, %v", p, err)
	}
	l, err := m.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waiter := acquireAsync(context.Background(), newMutex(t, rtest.Connect(t, cl), dir))
	serverkit.Eventually(t, 10*time.Second, "waiter queued", func() bool {
		p, err = m.Participants(context.Background())
		return err == nil && len(p) == 2
	})
	if p[0].Token != l.Token() || p[0].SessionID != s.ID() || string(p[0].Data) != "worker-1" || p[0].Kind != mutex.Kind {
		t.Fatalf("holder entry %+v, token %v session %x", p[0], l.Token(), s.ID())
	}
	if l.Context().Err() != nil {
		t.Fatal("lease context done while held")
	}
	release(t, l)
	if !errors.Is(context.Cause(l.Context()), recipe.ErrReleased) {
		t.Fatalf("cause after release: %v", context.Cause(l.Context()))
	}
	release(t, l) // idempotent
	r := rtest.Await(t, waiter, 10*time.Second)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.Lease.Token() <= l.Token() {
		t.Fatal("token did not grow")
	}
	release(t, r.Lease)
}

// TestC5_DeadlineWhileWaitingLeavesNothing: the waiter's deadline passes; its
// node is deleted although its context is done; a third client acquires as
// soon as the holder releases.
func TestC5_DeadlineWhileWaitingLeavesNothing(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	a := newMutex(t, rtest.Connect(t, cl), dir)
	bs := rtest.Connect(t, cl)
	b := newMutex(t, bs, dir)
	c := newMutex(t, rtest.Connect(t, cl), dir)
	la, err := a.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past deadline: %v, want DeadlineExceeded", err)
	}
	if n := in.Owned(dir, bs.ID()); len(n) != 0 {
		t.Fatalf("waiter left %v", n)
	}
	handOver(t, la, c)
}

// TestC6_TryAcquireLeavesNothing: a "not acquired" answer leaves zero nodes,
// also when the delete of the caller's node hits a connection loss.
func TestC6_TryAcquireLeavesNothing(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	a := newMutex(t, rtest.Connect(t, cl), dir)
	la, err := a.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	plain := rtest.Connect(t, cl)
	if _, err := newMutex(t, plain, dir).TryAcquire(context.Background()); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire on held lock: %v, want ErrLocked", err)
	}
	if n := in.Owned(dir, plain.ID()); len(n) != 0 {
		t.Fatalf("TryAcquire left %v", n)
	}

	// A slow server (the delete's request held 600 ms, longer than the
	// budget a caller that gave up gets): a refusal whose context is live
	// returns only once its node is gone.
	var slowed atomic.Int32
	slow := rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if op == zktest.OpDelete && slowed.Add(1) == 1 {
			time.Sleep(600 * time.Millisecond)
		}
		return zktest.Pass
	})))
	if _, err := newMutex(t, slow, dir).TryAcquire(context.Background()); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire with a slow delete: %v, want ErrLocked", err)
	}
	if slowed.Load() == 0 {
		t.Fatal("the delay was never injected")
	}
	if n := in.Owned(dir, slow.ID()); len(n) != 0 {
		t.Fatalf("TryAcquire returned ErrLocked with its node still there: %v", n)
	}

	// Across a blip: the delete is dropped and the connection cut.
	var drops atomic.Int32
	blip := rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if op == zktest.OpDelete && drops.Add(1) == 1 {
			return zktest.DropAndCut
		}
		return zktest.Pass
	})))
	id := blip.ID()
	if _, err := newMutex(t, blip, dir).TryAcquire(context.Background()); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire across a blip: %v, want ErrLocked", err)
	}
	if drops.Load() == 0 {
		t.Fatal("the fault was never injected")
	}
	serverkit.Eventually(t, 10*time.Second, "node of the blipped TryAcquire deleted", func() bool {
		return len(in.Owned(dir, id)) == 0
	})
	if blip.ID() != id {
		t.Fatal("session changed: the test would prove nothing")
	}
	c := newMutex(t, rtest.Connect(t, cl), dir)
	handOver(t, la, c)
}

// TestC2_ReplyLostAfterCreate: the create is applied but its reply is lost
// (variant: the listing right after it). Acquire holds through exactly one
// node, and nothing is left after Release.
func TestC2_ReplyLostAfterCreate(t *testing.T) {
	t.Parallel()
	for _, op := range []int32{zktest.OpCreate, zktest.OpGetChildren2} {
		t.Run(fmt.Sprintf("op%d", op), func(t *testing.T) {
			cl := zktest.Shared(t)
			in := zktest.Inspect(t, cl)
			b := newMutex(t, rtest.Connect(t, cl), dir)
			lb, err := b.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var cuts, creates atomic.Int32
			as := rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(nil, func(o int32) zktest.Fault {
				if o == zktest.OpCreate2 {
					o = zktest.OpCreate // the queue's creates go out as create2
				}
				if o == zktest.OpCreate {
					creates.Add(1)
				}
				if o == op && cuts.Add(1) == 1 {
					return zktest.SendAndCut
				}
				return zktest.Pass
			})))
			id := as.ID()
			ra := acquireAsync(context.Background(), newMutex(t, as, dir))
			serverkit.Eventually(t, 10*time.Second, "A queued with one node", func() bool {
				return len(in.Owned(dir, id)) == 1
			})
			release(t, lb)
			r := rtest.Await(t, ra, 10*time.Second)
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if cuts.Load() == 0 || as.ID() != id {
				t.Fatal("fault not injected, or session changed")
			}
			if creates.Load() != 1 {
				t.Fatalf("%d creates: the node whose reply was lost was not adopted", creates.Load())
			}
			owned := in.Owned(dir, id)
			if len(owned) != 1 {
				t.Fatalf("A owns %v, want exactly one node", owned)
			}
			if st := in.Stat(dir + "/" + owned[0]); st == nil || fence.Token(st.Czxid) != r.Lease.Token() {
				t.Fatalf("token %v is not the czxid of A's node", r.Lease.Token())
			}
			release(t, r.Lease)
			if n := in.Owned(dir, id); len(n) != 0 {
				t.Fatalf("left after release: %v", n)
			}
		})
	}
}

// TestC4_CancelledWhileCreateInFlight: the caller's context ends after the
// create was sent (variant: and the reply is lost too). No node is left.
func TestC4_CancelledWhileCreateInFlight(t *testing.T) {
	t.Parallel()
	for _, fault := range []zktest.Fault{zktest.Pass, zktest.SendAndCut} {
		t.Run(fmt.Sprint(fault), func(t *testing.T) {
			cl := zktest.Shared(t)
			in := zktest.Inspect(t, cl)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var hits atomic.Int32
			s := rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
				if (op == zktest.OpCreate || op == zktest.OpCreate2) && hits.Add(1) == 1 {
					cancel()
					return fault
				}
				return zktest.Pass
			})))
			id := s.ID()
			in.Create(dir, nil)
			_, err := newMutex(t, s, dir).Acquire(ctx)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Acquire: %v, want Canceled", err)
			}
			if hits.Load() == 0 {
				t.Fatal("fault not injected")
			}
			serverkit.Eventually(t, 10*time.Second, "no node left", func() bool { return len(in.Owned(dir, id)) == 0 })
		})
	}
}

// TestC4_CancelledOnFreshLockLeavesNothing: an Acquire of a lock whose
// directory does not exist yet (create, NoNode, directory, create again),
// cancelled 0-2 ms after it starts: once it returns an error, no create of
// that attempt can land any more, so another session's TryAcquire right
// after it is granted every time; and no directory made for it is left
// never used (a container that never had a child is never reaped).
func TestC4_CancelledOnFreshLockLeavesNothing(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	bs, cs := rtest.Connect(t, cl), rtest.Connect(t, cl)
	cancelled, blocked, unused := 0, 0, 0
	for i := 0; i < 200; i++ {
		p := fmt.Sprintf("/locks/fresh%d", i) // a new lock: no directory yet
		b, c := newMutex(t, bs, p), newMutex(t, cs, p)
		ctx, cancel := context.WithCancel(context.Background())
		stop := time.AfterFunc(time.Duration(i%21)*100*time.Microsecond, cancel)
		l, err := b.Acquire(ctx)
		stop.Stop()
		cancel()
		if err == nil {
			release(t, l)
			continue
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire: %v, want Canceled", err)
		}
		cancelled++
		if st := in.Stat(p); st != nil && st.Cversion == 0 {
			unused++
			t.Errorf("%s: the directory made for a cancelled Acquire never had a child", p)
		}
		lc, err := c.TryAcquire(context.Background())
		if err != nil {
			blocked++
			t.Errorf("TryAcquire of %s right after a cancelled Acquire returned: %v", p, err)
			continue
		}
		release(t, lc)
	}
	t.Logf("%d of 200 Acquires cancelled, %d left a node behind, %d a directory never used", cancelled, blocked, unused)
	if cancelled == 0 {
		t.Fatal("no Acquire was cancelled: the case was not exercised")
	}
}

// TestC7_ReleaseRetry: the delete of Release fails with a connection loss,
// not applied or applied; Release returns an error, the retried Release
// returns nil, and the node is gone.
func TestC7_ReleaseRetry(t *testing.T) {
	t.Parallel()
	for _, fault := range []zktest.Fault{zktest.DropAndCut, zktest.SendAndCut} {
		t.Run(fmt.Sprint(fault), func(t *testing.T) {
			cl := zktest.Shared(t)
			in := zktest.Inspect(t, cl)
			p := serverkit.NewFaultProxy()
			defer p.Close()
			var armed atomic.Bool
			s := rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(p.Dial, func(op int32) zktest.Fault {
				if op == zktest.OpDelete && armed.CompareAndSwap(true, false) {
					p.Cut() // keep the connection down until Resume
					return fault
				}
				return zktest.Pass
			})))
			l, err := newMutex(t, s, dir).Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			if err := l.Release(ctx); err == nil || errors.Is(err, recipe.ErrLeaseLost) {
				t.Fatalf("Release during the fault: %v, want a connection error", err)
			}
			if fault == zktest.DropAndCut && len(in.Children(dir)) != 1 {
				t.Fatal("the dropped delete was applied?")
			}
			p.Resume()
			release(t, l)
			if c := in.Children(dir); len(c) != 0 {
				t.Fatalf("left after retried release: %v", c)
			}
			release(t, l)
		})
	}
}

// TestC8_HolderCutOffPastSessionTimeout: A's network is cut past its session
// timeout; the server expires A and B acquires. A's lease context is done
// before B acquires, A's token is lower, and A's Release deletes nothing.
func TestC8_HolderCutOffPastSessionTimeout(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	as := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(time.Second))
	la, err := newMutex(t, as, dir).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	aDone := rtest.WatchDone(la.Context())
	rb := acquireAsync(context.Background(), newMutex(t, rtest.Connect(t, cl), dir))
	serverkit.Eventually(t, 10*time.Second, "B queued", func() bool { return len(in.Children(dir)) == 2 })
	p.Blackhole()
	r := rtest.Await(t, rb, 20*time.Second)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	lostAt := aDone.Get()
	if lostAt.IsZero() || !lostAt.Before(r.At) {
		t.Fatalf("A's lease ended at %v, B acquired at %v", lostAt, r.At)
	}
	if la.Token() >= r.Lease.Token() {
		t.Fatalf("A's token %v >= B's %v", la.Token(), r.Lease.Token())
	}
	cause := context.Cause(la.Context())
	if !errors.Is(cause, recipe.ErrSuspended) && !errors.Is(cause, recipe.ErrSessionLost) {
		t.Fatalf("cause %v", cause)
	}
	p.Resume()
	if err := la.Release(context.Background()); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Fatalf("A's Release: %v, want ErrLeaseLost", err)
	}
	serverkit.Eventually(t, 10*time.Second, "A reconnected with a new session", func() bool {
		return as.State().IsConnected()
	})
	time.Sleep(200 * time.Millisecond) // give A's cleaner a chance to misbehave
	if st := in.Stat(r.Lease.(interface{ Path() string }).Path()); st == nil || fence.Token(st.Czxid) != r.Lease.Token() {
		t.Fatal("B's node was removed by A")
	}
	release(t, r.Lease)
}

// TestC9_SuspensionEndsOwnershipByDefault: a cut ends the lease at once
// (cause ErrSuspended); after reconnecting to the same session the orphaned
// node is deleted, so another client acquires.
func TestC9_SuspensionEndsOwnershipByDefault(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	as := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(4*time.Second))
	id := as.ID()
	la, err := newMutex(t, as, dir).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	select {
	case <-la.Context().Done():
	case <-time.After(2 * time.Second):
		t.Fatal("lease survived a suspension under the default policy")
	}
	if !errors.Is(context.Cause(la.Context()), recipe.ErrSuspended) {
		t.Fatalf("cause %v", context.Cause(la.Context()))
	}
	p.Resume()
	serverkit.Eventually(t, 10*time.Second, "reconnected", func() bool { return as.State() == recipe.StateReconnected })
	if as.ID() != id {
		t.Fatal("session changed")
	}
	serverkit.Eventually(t, 10*time.Second, "orphaned node deleted", func() bool { return len(in.Owned(dir, id)) == 0 })
	acquireAndRelease(t, cl)
}

// TestC9_TolerateSuspensionCountsFromLastReply: under the opt-in policy a
// short cut keeps the lease; a partition ends it by last reply + f × timeout,
// before the client itself would even notice the dead connection (2/3 of the
// timeout), and long before the server can expire the session.
func TestC9_TolerateSuspensionCountsFromLastReply(t *testing.T) {
	cl := zktest.Shared(t)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	const timeout = 4 * time.Second
	as := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(timeout),
		zookeeper.WithSuspendPolicy(zookeeper.TolerateSuspension(0.5)))
	la, err := newMutex(t, as, dir).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	serverkit.Eventually(t, 2*time.Second, "suspended", func() bool { return as.State() == recipe.StateSuspended })
	if la.Context().Err() != nil {
		t.Fatalf("lease ended on a short cut: %v", context.Cause(la.Context()))
	}
	p.Resume()
	serverkit.Eventually(t, 10*time.Second, "reconnected", func() bool { return as.State() == recipe.StateReconnected })
	if la.Context().Err() != nil {
		t.Fatalf("lease ended across a reconnection to the same session: %v", context.Cause(la.Context()))
	}

	p.Blackhole()
	done := rtest.WatchDone(la.Context())
	select {
	case <-la.Context().Done():
	case <-time.After(timeout):
		t.Fatal("lease outlived the session timeout")
	}
	last := as.LastServerReply()
	limit := last.Add(timeout * 2 / 3)
	if at := done.Wait(t); at.After(limit) {
		t.Fatalf("lease ended %v after the last reply; the policy allows %v and the client notices at %v",
			at.Sub(last), timeout/2, timeout*2/3)
	}
	if !errors.Is(context.Cause(la.Context()), recipe.ErrSuspended) {
		t.Fatalf("cause %v", context.Cause(la.Context()))
	}
	t.Logf("lease ended %v after the last server reply (f × timeout = %v)", done.Wait(t).Sub(last), timeout/2)
}

// TestC10_WaiterLosesItsNode: a waiter's node disappears, deleted by someone
// else or expired with its session. The waiter gets a typed error (at once
// when its session expired; when the holder releases, for a deletion it has
// no watch on), and the client queued behind it then holds, alone.
func TestC10_WaiterLosesItsNode(t *testing.T) {
	for _, tc := range []struct {
		name     string
		want     error
		promptly bool // A's error comes before the holder releases
		fault    func(in *zktest.Inspector, a *zookeeper.Session, p *serverkit.FaultProxy)
	}{
		{"deleted", recipe.ErrNodeDeleted, false, func(in *zktest.Inspector, a *zookeeper.Session, _ *serverkit.FaultProxy) {
			in.Delete(dir + "/" + in.Owned(dir, a.ID())[0])
		}},
		{"session expired", recipe.ErrSessionLost, true, func(_ *zktest.Inspector, _ *zookeeper.Session, p *serverkit.FaultProxy) {
			p.Blackhole()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := zktest.Shared(t)
			in := zktest.Inspect(t, cl)
			lx, err := newMutex(t, rtest.Connect(t, cl), dir).Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			p := serverkit.NewFaultProxy()
			defer p.Close()
			as := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(time.Second))
			ra := acquireAsync(context.Background(), newMutex(t, as, dir))
			serverkit.Eventually(t, 10*time.Second, "A queued", func() bool { return len(in.Owned(dir, as.ID())) == 1 })
			rc := acquireAsync(context.Background(), newMutex(t, rtest.Connect(t, cl), dir))
			serverkit.Eventually(t, 10*time.Second, "C queued", func() bool { return len(in.Children(dir)) == 3 })
			tc.fault(in, as, p)
			checkA := func() {
				if r := rtest.Await(t, ra, 10*time.Second); !errors.Is(r.Err, tc.want) {
					t.Fatalf("A: %v, want %v", r.Err, tc.want)
				}
			}
			if tc.promptly {
				checkA()
				serverkit.Eventually(t, 10*time.Second, "A's node gone", func() bool { return len(in.Children(dir)) == 2 })
			}
			release(t, lx)
			if !tc.promptly {
				checkA()
			}
			rcr := rtest.Await(t, rc, 10*time.Second)
			if rcr.Err != nil {
				t.Fatal(rcr.Err)
			}
			if c := in.Children(dir); len(c) != 1 {
				t.Fatalf("nodes %v, want exactly C's", c)
			}
			release(t, rcr.Lease)
		})
	}
}

// TestC18_ParentRemovedBetweenEnsureAndCreate: the empty directory is deleted
// right before the create; Acquire re-creates it and succeeds.
func TestC18_ParentRemovedBetweenEnsureAndCreate(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create(dir, nil)
	var hits atomic.Int32
	s := rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if (op == zktest.OpCreate || op == zktest.OpCreate2) && hits.Add(1) == 1 {
			in.Delete(dir)
		}
		return zktest.Pass
	})))
	l, err := newMutex(t, s, dir).Acquire(context.Background())
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if hits.Load() < 2 {
		t.Fatalf("create sent %d times; the directory removal was not hit", hits.Load())
	}
	release(t, l)
}

// TestForeignChildrenIgnored: children that don't follow the grammar are
// neither predecessors nor fatal; a node in the grammar but of another kind
// (another recipe's) makes the acquisition fail with ErrMixedRecipes.
func TestForeignChildrenIgnored(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	for _, n := range []string{"foo", "lock-0000000000", "_c_nothex-lock-0000000001",
		"_c_0123456789abcdef0123456789abcdef-lock-12"} {
		in.Create(dir+"/"+n, nil)
	}
	m := newMutex(t, rtest.Connect(t, cl), dir)
	l, err := m.TryAcquire(context.Background())
	if err != nil {
		t.Fatalf("TryAcquire with foreign children: %v", err)
	}
	p, err := m.Participants(context.Background())
	if err != nil || len(p) != 1 {
		t.Fatalf("participants %v, %v", p, err)
	}
	release(t, l)
	if c := in.Children(dir); len(c) != 4 {
		t.Fatalf("foreign children touched: %v", c)
	}
	// A node in this module's grammar but of another kind is another
	// recipe's: refused (recipe.ErrMixedRecipes), and left alone.
	in.Create(dir+"/_c_0123456789abcdef0123456789abcdef-other-0000000002", nil)
	if _, err := m.TryAcquire(context.Background()); !errors.Is(err, recipe.ErrMixedRecipes) {
		t.Fatalf("TryAcquire beside another kind's node: %v, want ErrMixedRecipes", err)
	}
	if c := in.Children(dir); len(c) != 5 {
		t.Fatalf("after the refusal: %v", c)
	}
}

// TestACLRefusal: a directory the session may not create children in gives
// an error matching ErrNoPermission and zk.ErrNoAuth, and no node.
func TestACLRefusal(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create(dir, zk.WorldACL(zk.PermRead))
	m := newMutex(t, rtest.Connect(t, cl), dir)
	for name, f := range map[string]func(context.Context) (recipe.Lease, error){"Acquire": m.Acquire, "TryAcquire": m.TryAcquire} {
		_, err := f(context.Background())
		if !errors.Is(err, recipe.ErrNoPermission) || !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("%s: %v, want ErrNoPermission", name, err)
		}
		var oe *recipe.OpError
		if !errors.As(err, &oe) || oe.Op != "create" || oe.Path != dir {
			t.Fatalf("%s: %#v, want an *OpError for create %s", name, err, dir)
		}
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("nodes %v", c)
	}
}

func TestInvalidPaths(t *testing.T) {
	t.Parallel()
	s := rtest.Connect(t, zktest.Shared(t))
	for _, p := range []string{"", "locks", "/", "/locks/", "/a//b", "/zookeeper/x", "/a/../b"} {
		if _, err := mutex.New(s, p); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("mutex.New(%q): %v, want ErrInvalidPath", p, err)
		}
	}
	if _, err := mutex.New(nil, "/a"); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("nil session: %v", err)
	}
	if _, err := mutex.New(s, "/a", mutex.WithData(make([]byte, 1<<20+100))); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("data over 1 MiB: %v", err)
	}
}

// TestNewRefusesWhatCannotFit (issue 14): a lock whose requests could not
// fit ZooKeeper's packet limit is refused by its constructor, with a typed
// error, instead of a TryAcquire that times out while the server drops
// the connection again and again: a path of 1.1 MB, or a 600 KB path with
// 500 KB of data. Nothing reaches the server: the session never changes
// state, and the path next door works.
func TestNewRefusesWhatCannotFit(t *testing.T) {
	t.Parallel()
	s := rtest.Connect(t, zktest.Shared(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	states := s.Listen(ctx)
	huge := "/lib/huge/" + strings.Repeat("x", 1100000)
	if _, err := mutex.New(s, huge); !errors.Is(err, recipe.ErrTooLarge) || !errors.Is(err, recipe.ErrInvalidPath) {
		t.Errorf("mutex.New with a 1.1 MB path: %v, want ErrTooLarge and ErrInvalidPath", err)
	}
	big := "/lib/big/" + strings.Repeat("y", 600000)
	data := mutex.WithData(make([]byte, 500000))
	if _, err := mutex.New(s, big, data); !errors.Is(err, recipe.ErrTooLarge) || len(err.Error()) > 1000 {
		t.Errorf("mutex.New with a 600 KB path and 500 KB of data: %.1000v, want ErrTooLarge (in a message that does not quote the path)", err)
	}
	if _, err := mutex.NewRW(s, big, data); !errors.Is(err, recipe.ErrTooLarge) {
		t.Errorf("mutex.NewRW with a 600 KB path and 500 KB of data: %v, want ErrTooLarge", err)
	}
	if _, err := mutex.NewSemaphore(s, big, 2, data); !errors.Is(err, recipe.ErrTooLarge) {
		t.Errorf("mutex.NewSemaphore with a 600 KB path and 500 KB of data: %v, want ErrTooLarge", err)
	}
	l, err := newMutex(t, s, "/lib/next-door").TryAcquire(ctx)
	if err != nil {
		t.Fatalf("the path next door: %v", err)
	}
	release(t, l)
	select {
	case c := <-states:
		t.Fatalf("the connection changed state: %+v", c)
	default:
	}
	if n := zkside.SessionOf(s).PendingCleanup(); n != 0 {
		t.Fatalf("%d deletes left for the cleaner", n)
	}
}

func TestClosedSession(t *testing.T) {
	t.Parallel()
	s := rtest.Connect(t, zktest.Shared(t))
	m := newMutex(t, s, dir)
	l, err := m.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := mutex.New(s, dir); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Fatalf("mutex.New on a closed session: %v", err)
	}
	if !errors.Is(context.Cause(l.Context()), recipe.ErrSessionClosed) {
		t.Fatalf("lease cause after Close: %v", context.Cause(l.Context()))
	}
	if _, err := m.Acquire(context.Background()); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Fatalf("Acquire on closed session: %v", err)
	}
	if err := l.Release(context.Background()); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Fatalf("Release after Close: %v", err)
	}
}

// TestLeaseEndsWhenOwnNodeDeleted: an operator deletes the holder's node;
// the lease context ends at once with ErrNodeDeleted, also after a data write
// to the node consumed the first watch.
func TestLeaseEndsWhenOwnNodeDeleted(t *testing.T) {
	t.Parallel()
	for _, writeFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("writeFirst=%v", writeFirst), func(t *testing.T) {
			cl := zktest.Shared(t)
			in := zktest.Inspect(t, cl)
			l, err := newMutex(t, rtest.Connect(t, cl), dir).Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			node := l.(interface{ Path() string }).Path()
			if writeFirst {
				if _, err := in.Conn().Set(cl.Chroot()+node, []byte("x"), -1); err != nil {
					t.Fatal(err)
				}
				time.Sleep(200 * time.Millisecond) // let the watch be re-armed
				if l.Context().Err() != nil {
					t.Fatalf("a data write ended the lease: %v", context.Cause(l.Context()))
				}
			}
			in.Delete(node)
			select {
			case <-l.Context().Done():
			case <-time.After(5 * time.Second):
				t.Fatal("lease survived the deletion of its node")
			}
			if !errors.Is(context.Cause(l.Context()), recipe.ErrNodeDeleted) {
				t.Fatalf("cause %v", context.Cause(l.Context()))
			}
			if err := l.Release(context.Background()); !errors.Is(err, recipe.ErrLeaseLost) {
				t.Fatalf("Release: %v", err)
			}
		})
	}
}

// TestWatchesOnlyPredecessorAndLeavesNone: with a holder and 5 queued
// waiters the server holds exactly one watch per waiter (its immediate
// predecessor; a waiter's own node is watched from its grant on) plus the
// holder's watch on its own node: no herd (a release fires the holder's
// own watch and its successor's, nothing else). Once everyone is done, no
// watch is left on the server.
func TestWatchesOnlyPredecessorAndLeavesNone(t *testing.T) {
	cl := zktest.Start(t)
	t.Parallel() // after Start: servers start one at a time, before the parallel tests run
	in := zktest.Inspect(t, cl)
	ctx := context.Background()
	watches := func() int {
		n, err := zktest.WatchCount(ctx, cl.Addrs()[0])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	holder, err := newMutex(t, rtest.Connect(t, cl), dir).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var waiters []<-chan rtest.Result
	for i := 0; i < 5; i++ {
		waiters = append(waiters, acquireAsync(ctx, newMutex(t, rtest.Connect(t, cl), dir)))
	}
	serverkit.Eventually(t, 10*time.Second, "5 waiters watching", func() bool { return len(in.Children(dir)) == 6 && watches() == 6 })
	release(t, holder)
	// Five goroutines queued the waiters, so the queue's order need not be
	// the slice's: each grant is taken as it comes (awaiting waiters[0]
	// first waited forever when it was second in the queue).
	granted := make(chan rtest.Result, len(waiters))
	for _, w := range waiters {
		go func() { granted <- <-w }()
	}
	for range waiters {
		r := rtest.Await(t, granted, 10*time.Second)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		release(t, r.Lease)
	}
	serverkit.Eventually(t, 5*time.Second, "no watch left", func() bool { return watches() == 0 })
}

// stallConn models a client that reads late: it ignores read deadlines (so
// go-zookeeper never notices the silence by itself) and its reads can be
// frozen, as when the process is paused while the server's replies queue up.
type stallConn struct {
	net.Conn
	until *atomic.Int64 // unix nanos until which reads block
}

func (c *stallConn) SetReadDeadline(time.Time) error { return nil }

func (c *stallConn) Read(p []byte) (int, error) {
	if d := time.Until(time.Unix(0, c.until.Load())); d > 0 {
		time.Sleep(d)
	}
	return c.Conn.Read(p)
}

// TestC9_ClientNoticesLate: the client stops reading past the session
// timeout and go-zookeeper never notices. The lease still ends, counted from
// the last server reply and before the session timeout from it; afterwards
// the session re-validates itself (no sticky LOST), the surviving node is
// cleaned up, and another client can acquire.
func TestC9_ClientNoticesLate(t *testing.T) {
	cl := zktest.Shared(t) // the stall is on this client's connection only
	in := zktest.Inspect(t, cl)
	var until atomic.Int64
	dial := func(n, a string, d time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(n, a, d)
		if err != nil {
			return nil, err
		}
		return &stallConn{Conn: c, until: &until}, nil
	}
	const timeout = 2 * time.Second
	s := rtest.Connect(t, cl, zookeeper.WithSessionTimeout(timeout), zookeeper.WithDialer(dial))
	l, err := newMutex(t, s, dir).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	done := rtest.WatchDone(l.Context())
	until.Store(time.Now().Add(timeout + time.Second).UnixNano())
	select {
	case <-l.Context().Done():
	case <-time.After(timeout + 5*time.Second):
		t.Fatal("lease survived a stall past the session timeout")
	}
	if last, at := s.LastServerReply(), done.Wait(t); !at.Before(last.Add(timeout)) {
		t.Fatalf("lease ended %v after the last server reply, at or past the session timeout %v", at.Sub(last), timeout)
	}
	serverkit.Eventually(t, 15*time.Second, "session connected again", func() bool { return s.State().IsConnected() })
	serverkit.Eventually(t, 10*time.Second, "stale node removed", func() bool { return len(in.Children(dir)) == 0 })
	acquireAndRelease(t, cl)
}

// TestChrootBelowReadOnlyParent: the chroot's parent is read-only; creating
// the lock directory must not need any permission above the chroot.
func TestChrootBelowReadOnlyParent(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create("/tenants/app", nil)
	if _, err := in.Conn().SetACL(cl.Chroot()+"/tenants", zk.WorldACL(zk.PermRead|zk.PermAdmin), -1); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := in.Conn().SetACL(cl.Chroot()+"/tenants", zk.WorldACL(zk.PermAll), -1); err != nil {
			t.Error(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := zookeeper.Connect(ctx, []string{cl.Addrs()[0] + cl.Chroot() + "/tenants/app"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := newMutex(t, s, "/deep/lock").Acquire(ctx)
	if err != nil {
		t.Fatalf("Acquire under a chroot with a read-only parent: %v", err)
	}
	if in.Stat("/tenants/app/deep/lock") == nil {
		t.Fatal("lock directory not created under the chroot")
	}
	release(t, l)
}

// TestContextHonouredWhenServerFrozen: with the server frozen (SIGSTOP),
// requests get no answer; Acquire, TryAcquire and Release still return when
// their context ends (not when the client gives up on the connection,
// seconds later), and once the server runs again nothing is left behind:
// the create that was in flight is undone when it lands (case C4).
func TestContextHonouredWhenServerFrozen(t *testing.T) {
	cl := zktest.Start(t)
	in := zktest.Inspect(t, cl)
	const timeout = 6 * time.Second
	s := rtest.Connect(t, cl, zookeeper.WithSessionTimeout(timeout))
	m := newMutex(t, s, dir)
	held, err := m.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	other := newMutex(t, rtest.Connect(t, cl, zookeeper.WithSessionTimeout(timeout)), dir)
	if err := cl.Pause(0); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			cl.Resume(0)
		}
	}()
	calls := map[string]func(context.Context) error{
		"TryAcquire": func(ctx context.Context) error { _, err := other.TryAcquire(ctx); return err },
		"Acquire":    func(ctx context.Context) error { _, err := other.Acquire(ctx); return err },
		"Release":    held.Release,
	}
	for _, name := range []string{"TryAcquire", "Acquire", "Release"} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		err := calls[name](ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s on a frozen server: %v, want DeadlineExceeded", name, err)
		}
		// The client itself would give up only after 2/3 of the timeout (4 s);
		// 200 ms for ctx and up to 250 ms for the clean-up of a failed attempt.
		if d := time.Since(start); d > time.Second {
			t.Fatalf("%s returned after %v, its context ended after 200ms", name, d)
		}
	}
	if err := cl.Resume(0); err != nil {
		t.Fatal(err)
	}
	resumed = true
	serverkit.Eventually(t, 15*time.Second, "no node left once the server runs again", func() bool {
		return len(in.Children(dir)) == 0
	})
}

// TestDigestAuthAndACL: a lock directory readable by all but writable only
// by a digest identity; a session authenticated with WithAuth (and creating
// its nodes with that ACL) locks, an anonymous one gets ErrNoPermission.
func TestDigestAuthAndACL(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	acl := append(zk.DigestACL(zk.PermAll, "locker", "secret"), zk.WorldACL(zk.PermRead)...)
	in.Create(dir, acl)
	authed := rtest.Connect(t, cl, zookeeper.WithAuth("digest", []byte("locker:secret")), zookeeper.WithACL(acl), nil)
	l, err := newMutex(t, authed, dir).Acquire(context.Background())
	if err != nil {
		t.Fatalf("authenticated Acquire: %v", err)
	}
	release(t, l)
	if _, err := newMutex(t, rtest.Connect(t, cl), dir).TryAcquire(context.Background()); !errors.Is(err, recipe.ErrNoPermission) {
		t.Fatalf("anonymous TryAcquire: %v, want ErrNoPermission", err)
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("left %v", c)
	}
}

// TestReleaseAfterToleratedOutageKeepsForeignNode: a lease lives through a
// tolerated suspension; meanwhile another client deletes its node and
// creates one at the exact path. Release right after RECONNECTED must not
// delete that node (its one-request delete by version is only for a lease
// whose connection never went down): it reports the loss and leaves the
// foreign node. Both a first Acquire (own-node watch) and a later one
// (whose own-node watch is the directory's child watch) are checked.
func TestReleaseAfterToleratedOutageKeepsForeignNode(t *testing.T) {
	cl := zktest.Start(t, zktest.WithTickTime(500*time.Millisecond))
	t.Parallel() // after Start: servers start one at a time, before the parallel tests run
	in := zktest.Inspect(t, cl)
	for _, warm := range []bool{false, true} {
		p := serverkit.NewFaultProxy()
		defer p.Close()
		s := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(8*time.Second),
			zookeeper.WithSuspendPolicy(zookeeper.TolerateSuspension(0.6)))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m := newMutex(t, s, dir)
		if warm {
			l, err := m.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			release(t, l)
		}
		l, err := m.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		states := s.Listen(ctx)
		p.Cut()
		waitFor := func(want ...recipe.ConnState) {
			t.Helper()
			for st := range states {
				if slices.Contains(want, st.State) {
					return
				}
			}
			t.Fatalf("no %v", want)
		}
		waitFor(recipe.StateSuspended)
		node := l.(interface{ Path() string }).Path()
		// Replaced in one transaction: the directory is a container, which
		// the server deletes once it is seen empty between the two steps.
		if _, err := in.Conn().Multi(&zk.DeleteRequest{Path: cl.Chroot() + node, Version: -1},
			&zk.CreateRequest{Path: cl.Chroot() + node, Data: []byte("foreign"), Acl: zk.WorldACL(zk.PermAll)}); err != nil {
			t.Fatal(err)
		}
		p.Resume()
		waitFor(recipe.StateReconnected)
		if err := l.Release(ctx); err != nil && !errors.Is(err, recipe.ErrLeaseLost) {
			t.Fatalf("warm=%v: Release: %v, want nil or ErrLeaseLost", warm, err)
		}
		if in.Stat(node) == nil {
			t.Fatalf("warm=%v: Release deleted the foreign node at %s", warm, node)
		}
		in.Delete(node)
	}
}

// TestCreateOutlivesItsSession: the create's request is held on the wire
// past the session timeout (a process frozen while sending), so the
// watchdog presumes the session expired and closes the connection under
// the create. Acquire must then either succeed on the next session or fail
// with an error matching recipe.ErrSessionLost (so a caller knows to join
// again), never with a bare connection error; and it leaves no node.
// With retries exhausted at once (no backoff), the error must match
// ErrSessionLost.
func TestCreateOutlivesItsSession(t *testing.T) {
	for _, noRetry := range []bool{false, true} {
		t.Run(fmt.Sprintf("noRetry=%v", noRetry), func(t *testing.T) {
			t.Parallel() // beside its sibling only: the parent is not parallel
			cl := zktest.Shared(t)
			in := zktest.Inspect(t, cl)
			var held atomic.Int32
			opts := []zookeeper.Option{zookeeper.WithSessionTimeout(2 * time.Second), zookeeper.WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
				if (op == zktest.OpCreate || op == zktest.OpCreate2) && held.Add(1) == 1 {
					time.Sleep(2500 * time.Millisecond)
				}
				return zktest.Pass
			}))}
			if noRetry {
				opts = append(opts, zookeeper.WithRetryPolicy(func() backoff.BackOff { return &backoff.StopBackOff{} }))
			}
			s := rtest.Connect(t, cl, opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l, err := newMutex(t, s, dir).Acquire(ctx)
			if held.Load() == 0 {
				t.Fatal("the create was never held: the test proves nothing")
			}
			switch {
			case err == nil && !noRetry:
				t.Logf("acquired on the next session (token %v)", l.Token())
				release(t, l)
			case errors.Is(err, recipe.ErrSessionLost):
				t.Logf("Acquire: %v", err)
			default:
				t.Fatalf("Acquire: %v, want an error matching ErrSessionLost (or, with retries, success)", err)
			}
			serverkit.Eventually(t, 10*time.Second, "no node left", func() bool { return len(in.Children(dir)) == 0 })
		})
	}
}
