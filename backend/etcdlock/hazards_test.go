package etcdlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The hazards issue 13 names for etcd, each reproduced against the real
// server: what etcd's own concurrency package does wrong, and that this
// package does not.

// opCtx bounds a step that should complete promptly.
func opCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// acquireAsync runs m.Acquire(ctx) on a goroutine.
func acquireAsync(ctx context.Context, m *etcdlock.Mutex) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := m.Acquire(ctx)
		ch <- result{l, err, time.Now()}
	}()
	return ch
}

type result struct {
	lease recipe.Lease
	err   error
	at    time.Time
}

// await receives a result within d or fails the test.
func await(t *testing.T, ch <-chan result, d time.Duration, what string) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("%s: no answer within %v", what, d)
		return result{}
	}
}

// expectPending fails the test if ch delivers within d.
func expectPending(t *testing.T, ch <-chan result, d time.Duration, what string) {
	t.Helper()
	select {
	case r := <-ch:
		if r.lease != nil {
			_ = r.lease.Release(context.Background())
		}
		t.Fatalf("%s: returned (%v) while it should wait", what, r.err)
	case <-time.After(d):
	}
}

// expectKeys waits until the lock named name has want keys.
func (e *env) expectKeys(t *testing.T, name string, want int, why string) {
	t.Helper()
	deadline := time.Now().Add(2 * (testTTL + 5*time.Second))
	for {
		n, err := e.keys(opCtx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keys for lock %s, want %d (%s)", n, name, want, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Etcd issue 5199: concurrency.Mutex names its key after the session's
// lease, so two contenders of one session share one key and both "hold" the
// lock. Here every Acquire puts a key of its own.
func TestSameSessionContendersHaveOwnKeys(t *testing.T) {
	e := newEnv(t)
	s, _ := e.connect(t)
	m1, m2 := mutex(t, s, "shared"), mutex(t, s, "shared")

	l1, err := m1.Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if l, err := m1.TryAcquire(opCtx(t)); !errors.Is(err, recipe.ErrLocked) {
		if l != nil {
			_ = l.Release(opCtx(t))
		}
		t.Fatalf("TryAcquire on the holder's own session and Mutex: %v, want recipe.ErrLocked", err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	same, other := acquireAsync(wctx, m1), acquireAsync(wctx, m2)
	e.expectKeys(t, "shared", 3, "the holder and two waiters of the same session, each with its own key")
	expectPending(t, same, 300*time.Millisecond, "a second Acquire on the holder's Mutex")
	expectPending(t, other, 0, "an Acquire on another Mutex of the holder's session")

	if err := l1.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	// Exactly one waiter is granted; the other waits for it.
	var first result
	var rest <-chan result
	select {
	case first = <-same:
		rest = other
	case first = <-other:
		rest = same
	case <-time.After(15 * time.Second):
		t.Fatal("no waiter granted after the release")
	}
	if first.err != nil {
		t.Fatal(first.err)
	}
	expectPending(t, rest, 300*time.Millisecond, "the other waiter of the session while the first holds")
	if first.lease.Token() <= l1.Token() {
		t.Errorf("token %v after %v", first.lease.Token(), l1.Token())
	}
	if err := first.lease.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	last := await(t, rest, 15*time.Second, "the last waiter")
	if last.err != nil {
		t.Fatal(last.err)
	}
	if last.lease.Token() <= first.lease.Token() {
		t.Errorf("token %v after %v", last.lease.Token(), first.lease.Token())
	}
	if err := last.lease.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	e.expectKeys(t, "shared", 0, "all released")
}

// Etcd issue 22082: concurrency.Mutex.Unlock deletes its key by name, so an
// Unlock retried after a lost reply deletes the key of a newer holder that
// reused the name. Here the delete's reply is lost (the server applied it),
// a newer holder of the same session acquires, and the retried Release must
// leave that holder alone.
func TestRetriedReleaseKeepsNewerHolder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var loseReplies atomic.Bool
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   e.srv.Endpoints(),
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				err := invoke(ctx, method, req, reply, cc, opts...)
				if txn, ok := req.(*pb.TxnRequest); ok && err == nil && loseReplies.Load() && deletes(txn) {
					return status.Error(codes.Unavailable, "test: the reply of an applied delete was lost")
				}
				return err
			})},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	s, err := etcdlock.NewSession(opCtx(t), cli, etcdlock.WithTTL(testTTL), etcdlock.WithPrefix(e.prefix), etcdlock.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := mutex(t, s, "retried-release")
	other, _ := e.connect(t)
	om := mutex(t, other, "retried-release")

	l1, err := m.Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	loseReplies.Store(true)
	rctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err = l1.Release(rctx)
	cancel()
	if err == nil {
		t.Fatal("Release returned nil although every reply of its delete was lost")
	}
	t.Logf("Release with lost replies: %v", err)
	e.expectKeys(t, "retried-release", 0, "the server applied the delete")

	l2, err := m.Acquire(opCtx(t)) // the newer holder, on the same session and Mutex
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // Release's background retries run, still losing replies
	loseReplies.Store(false)
	if err := l1.Release(opCtx(t)); err != nil {
		t.Fatalf("the retried Release: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // room for a background retry to misbehave
	if err := l2.Context().Err(); err != nil {
		t.Fatalf("the newer holder's lease ended: %v", context.Cause(l2.Context()))
	}
	e.expectKeys(t, "retried-release", 1, "the newer holder's key")
	if l, err := om.TryAcquire(opCtx(t)); !errors.Is(err, recipe.ErrLocked) {
		if l != nil {
			_ = l.Release(opCtx(t))
		}
		t.Fatalf("another session's TryAcquire while the newer holder holds: %v, want recipe.ErrLocked", err)
	}
	if l2.Token() <= l1.Token() {
		t.Errorf("token %v after %v", l2.Token(), l1.Token())
	}
	if err := l2.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	e.expectKeys(t, "retried-release", 0, "all released")
}

// deletes reports whether a transaction request deletes anything.
func deletes(txn *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{txn.Success, txn.Failure} {
		for _, op := range ops {
			if op.GetRequestDeleteRange() != nil {
				return true
			}
		}
	}
	return false
}

// Etcd issue 19597: a waiter of concurrency.Mutex watches only the key ahead
// of it, so when its own session dies it keeps waiting, and is granted later
// with a dead session. Here a waiter returns as soon as its lease is lost:
// cut off from the server (presumed lost), revoked by an operator (lost), or
// its key deleted (ErrNodeDeleted); and the lock goes to exactly one live
// contender afterwards.
func TestWaiterStopsWhenItsSessionDies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "waiter-session"
	holder, _ := e.connect(t)
	lh, err := mutex(t, holder, name).Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("cut off", func(t *testing.T) {
		w, p := e.connect(t)
		ch := acquireAsync(wctx, mutex(t, w, name))
		e.expectKeys(t, name, 2, "the holder and the waiter")
		cut := time.Now()
		p.Blackhole()
		r := await(t, ch, 2*testTTL, "the cut-off waiter")
		t.Logf("the cut-off waiter returned %v after the cut: %v", r.at.Sub(cut).Round(time.Millisecond), r.err)
		if !errors.Is(r.err, recipe.ErrSessionLost) || !errors.Is(r.err, recipe.ErrSuspended) {
			t.Errorf("the cut-off waiter: %v, want an error matching recipe.ErrSessionLost and recipe.ErrSuspended", r.err)
		}
		p.Resume()
		e.expectKeys(t, name, 1, "the waiter's key went with its lease")
	})
	t.Run("lease revoked", func(t *testing.T) {
		w, _ := e.connect(t)
		ch := acquireAsync(wctx, mutex(t, w, name))
		e.expectKeys(t, name, 2, "the holder and the waiter")
		if _, err := e.in.Revoke(opCtx(t), w.ID()); err != nil {
			t.Fatal(err)
		}
		r := await(t, ch, 2*testTTL, "the waiter whose lease was revoked")
		if !errors.Is(r.err, recipe.ErrSessionLost) {
			t.Errorf("the waiter whose lease was revoked: %v, want an error matching recipe.ErrSessionLost", r.err)
		}
		select {
		case <-w.Done():
		case <-time.After(2 * testTTL):
			t.Errorf("Session.Done not closed after its lease was revoked")
		}
	})
	t.Run("key deleted", func(t *testing.T) {
		w, _ := e.connect(t)
		ch := acquireAsync(wctx, mutex(t, w, name))
		e.expectKeys(t, name, 2, "the holder and the waiter")
		resp, err := e.in.Get(opCtx(t), e.prefix+"/"+name+"/_lock_", clientv3.WithLastCreate()...)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("the waiter's key: %v %v", resp, err)
		}
		if _, err := e.in.Delete(opCtx(t), string(resp.Kvs[0].Key)); err != nil {
			t.Fatal(err)
		}
		r := await(t, ch, 2*testTTL, "the waiter whose key was deleted")
		if !errors.Is(r.err, recipe.ErrNodeDeleted) {
			t.Errorf("the waiter whose key was deleted: %v, want an error matching recipe.ErrNodeDeleted", r.err)
		}
	})

	// A live waiter queued behind the dead ones is the one granted.
	live, _ := e.connect(t)
	ch := acquireAsync(wctx, mutex(t, live, name))
	e.expectKeys(t, name, 2, "the holder and the live waiter")
	if err := lh.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch, 15*time.Second, "the live waiter")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.lease.Token() <= lh.Token() {
		t.Errorf("token %v after %v", r.lease.Token(), lh.Token())
	}
	e.expectKeys(t, name, 1, "the live waiter's key only")
	if err := r.lease.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
}

// A holder whose key is deleted by someone else, or whose etcd lease is
// revoked, sees its lease context end with a loss cause; its Release then
// returns ErrLeaseLost and deletes nothing (the next holder keeps the lock).
func TestHolderLossByOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		name string
		do   func(t *testing.T, s *etcdlock.Session, l recipe.Lease)
		want error
	}{
		{"key deleted", func(t *testing.T, s *etcdlock.Session, l recipe.Lease) {
			resp, err := e.in.Get(opCtx(t), e.prefix+"/lost/_lock_", clientv3.WithFirstCreate()...)
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("the holder's key: %v %v", resp, err)
			}
			if _, err := e.in.Delete(opCtx(t), string(resp.Kvs[0].Key)); err != nil {
				t.Fatal(err)
			}
		}, recipe.ErrNodeDeleted},
		{"lease revoked", func(t *testing.T, s *etcdlock.Session, l recipe.Lease) {
			if _, err := e.in.Revoke(opCtx(t), s.ID()); err != nil {
				t.Fatal(err)
			}
		}, recipe.ErrSessionLost},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := e.connect(t)
			l, err := mutex(t, s, "lost").Acquire(opCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			c.do(t, s, l)
			select {
			case <-l.Context().Done():
			case <-time.After(2 * testTTL):
				t.Fatal("the lease context is live after the loss")
			}
			cause := context.Cause(l.Context())
			if !errors.Is(cause, c.want) {
				t.Errorf("cause %v, want an ownership loss (%v)", cause, c.want)
			}
			other, _ := e.connect(t)
			next, err := mutex(t, other, "lost").Acquire(opCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(opCtx(t)); !errors.Is(err, recipe.ErrLeaseLost) {
				t.Errorf("Release after the loss: %v, want recipe.ErrLeaseLost", err)
			}
			if err := next.Context().Err(); err != nil {
				t.Errorf("the next holder's lease ended: %v", context.Cause(next.Context()))
			}
			e.expectKeys(t, "lost", 1, "the next holder's key")
			if err := next.Release(opCtx(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The numbers: after a cut, the holder's lease context ends (N: at most 2/3
// TTL after the send of its newest acknowledged keep-alive) before the
// server lets another contender in (M: at least a full TTL after the server
// received that keep-alive). The cut lands at different points of the
// keep-alive cycle.
func TestLossBeforeServerGrants(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i, delay := range []time.Duration{0, testTTL / 12} {
		name := "numbers-" + string(rune('a'+i))
		a, p := e.connect(t)
		b, _ := e.connect(t)
		la, err := mutex(t, a, name).Acquire(opCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		var lostNano atomic.Int64 // when the holder's context ended (an upper bound)
		context.AfterFunc(la.Context(), func() { lostNano.Store(time.Now().UnixNano()) })
		wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var liveAtGrant atomic.Bool
		ch := make(chan result, 1)
		go func() {
			l, err := mutex(t, b, name).Acquire(wctx)
			liveAtGrant.Store(err == nil && la.Context().Err() == nil)
			ch <- result{l, err, time.Now()}
		}()
		e.expectKeys(t, name, 2, "holder and waiter")
		time.Sleep(delay)
		cut := time.Now()
		p.Blackhole()
		r := await(t, ch, 2*(testTTL+5*time.Second), "the waiter")
		if r.err != nil {
			t.Fatal(r.err)
		}
		<-la.Context().Done()
		for lostNano.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		lost := time.Unix(0, lostNano.Load())
		t.Logf("cut %v after a keep-alive cycle start: holder's context ended %v after the cut (bound 2/3 TTL = %v), waiter granted %v after the cut (server bound: >= TTL - TTL/6 = %v)",
			delay, lost.Sub(cut).Round(time.Millisecond), testTTL*2/3, r.at.Sub(cut).Round(time.Millisecond), testTTL*5/6)
		if liveAtGrant.Load() || !lost.Before(r.at) {
			t.Errorf("the waiter was granted while the cut-off holder's context was live")
		}
		if cause := context.Cause(la.Context()); !errors.Is(cause, recipe.ErrSuspended) {
			t.Errorf("the cut-off holder's cause: %v, want recipe.ErrSuspended", cause)
		}
		p.Resume()
		if err := r.lease.Release(opCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
}
