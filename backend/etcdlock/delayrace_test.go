package etcdlock_test

import (
	"context"
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

// tap is a client whose answered unary requests are counted, and whose replies can
// be lost after the server applied the request (lose: how many more).
type tap struct {
	requests atomic.Int64
	lose     atomic.Int64
	after    atomic.Pointer[func(*pb.TxnRequest)] // called after each answered transaction
}

// tappedSession opens a Session (testTTL) on a client behind a tap.
func (e *env) tappedSession(t *testing.T) (*etcdlock.Session, *tap) {
	t.Helper()
	tp := &tap{}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   e.srv.Endpoints(),
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				err := invoke(ctx, method, req, reply, cc, opts...)
				if err == nil { // sent and answered (a lease's watcher may call with its context done)
					tp.requests.Add(1)
				}
				if txn, ok := req.(*pb.TxnRequest); ok && err == nil {
					if f := tp.after.Load(); f != nil {
						(*f)(txn)
					}
					if tp.lose.Add(-1) >= 0 {
						return status.Error(codes.Unavailable, "test: the reply of an applied transaction was lost")
					}
				}
				return err
			})},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	s, err := etcdlock.NewSession(opCtx(t), cli, etcdlock.WithTTL(testTTL), etcdlock.WithPrefix(e.prefix), etcdlock.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, tp
}

// TestLockDelayRoundTrips: an uncontended Acquire, a TryAcquire and a
// Release are one request each, with the lock-delay as without it (the
// record is written and deleted in the transactions of the put and the
// delete; the keep-alive loop sends none in this short a time).
func TestLockDelayRoundTrips(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, tp := e.tappedSession(t)
	for _, d := range []time.Duration{0, shortDelay} {
		m, err := etcdlock.New(s, "trips", etcdlock.WithLockDelay(d))
		if err != nil {
			t.Fatal(err)
		}
		for _, try := range []bool{false, true} {
			acquire := m.Acquire
			if try {
				acquire = m.TryAcquire
			}
			tp.requests.Store(0)
			l, err := acquire(opCtx(t))
			if err != nil {
				t.Fatalf("delay %v, try %v: %v", d, try, err)
			}
			if n := tp.requests.Load(); n != 1 {
				t.Errorf("delay %v, try %v: the grant took %d requests, want 1", d, try, n)
			}
			tp.requests.Store(0)
			releaseOK(t, l)
			if n := tp.requests.Load(); n != 1 {
				t.Errorf("delay %v, try %v: the Release took %d requests, want 1", d, try, n)
			}
		}
	}
	e.expectKeys(t, "trips", 0, "all released")
}

// TestLockDelayLostReplies: the record and the key change in one
// transaction, so a lost reply can't split them. The put that records the
// grant, its reply lost, is sent again and finds both (no delay served for
// its own record); the Release's delete, its reply lost, was applied with
// the record's: a clean end, and the waiter serves nothing.
func TestLockDelayLostReplies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "lost-replies"
	s, tp := e.tappedSession(t)
	a, err := etcdlock.New(s, name, etcdlock.WithLockDelay(shortDelay))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := e.delayed(t, name)
	tp.lose.Store(1)
	start := time.Now()
	la, err := a.Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if took, served := time.Since(start), recipe.LockDelayServed(la); took >= shortDelay || served != 0 {
		t.Errorf("A's grant, its put's reply lost: took %v, served %v; want at once, none", took, served)
	}
	pb := acquireAsync(opCtx(t), b)
	time.Sleep(300 * time.Millisecond) // B in line
	tp.lose.Store(1)
	released := time.Now()
	if err := la.Release(opCtx(t)); err != nil {
		t.Fatalf("A's Release, its first reply lost: %v", err)
	}
	r := granted(t, pb, 10*time.Second, "B")
	if took, served := r.at.Sub(released), recipe.LockDelayServed(r.lease); took >= shortDelay || served != 0 {
		t.Errorf("B after A's clean Release (its reply lost): granted after %v, served %v; want at once, none", took, served)
	}
	releaseOK(t, r.lease)
	e.expectKeys(t, name, 0, "all released")
}

// TestLockDelayGiveUpAfterRecord: an Acquire whose caller gives up just
// after the transaction that recorded its grant was applied never hands
// the grant out: its cleanup deletes the record with its key, so the next
// contender serves nothing.
func TestLockDelayGiveUpAfterRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "give-up"
	s, tp := e.tappedSession(t)
	a, err := etcdlock.New(s, name, etcdlock.WithLockDelay(shortDelay))
	if err != nil {
		t.Fatal(err)
	}
	ctx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	f := func(txn *pb.TxnRequest) {
		if len(txn.Success) > 1 { // the put and the record
			giveUp()
		}
	}
	tp.after.Store(&f)
	if l, err := a.Acquire(ctx); err == nil {
		releaseOK(t, l)
		t.Fatal("A's Acquire was granted after its caller gave up")
	}
	tp.after.Store(nil)
	e.expectKeys(t, name, 0, "A gave up: its key and its record are gone")
	b, _ := e.delayed(t, name)
	start := time.Now()
	lb, _ := acquireWithin(t, b, 10*time.Second, "B")
	if took, served := time.Since(start), recipe.LockDelayServed(lb); took >= shortDelay || served != 0 {
		t.Errorf("B after A gave up: granted after %v, served %v; want at once, none", took, served)
	}
	releaseOK(t, lb)
}
