package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
)

// With one follower of three silent (cut off: its connections open, nothing
// answered), an acquisition must not wait on a request the client happened
// to send to it while the two others answer: not the grant of a new etcd
// lease (the last one revoked), not the put of its key, not the delete of
// its key after its ctx ended. Each is sent again after attemptTimeout.
// Before, whichever went to the silent member waited until gRPC closed the
// connection (about 14 s), the acquisition holding no key meanwhile (found
// by the nemesis: all four clients inside Acquire, no key in the lock's
// range, single Acquire calls of up to 18.7 s; Acquires with a 4 s ctx
// returning after 7 s).
func TestSilentMemberDoesNotStallAcquire(t *testing.T) {
	c := etcdtest.StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := etcdlock.Connect(ctx, c.URL("/silentwait"), etcdlock.WithTTL(testTTL), etcdlock.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	admin := c.Client(t)
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Partition((leader + 1) % c.Size()); err != nil {
		t.Fatal(err)
	}
	defer c.Heal()
	m := mutex(t, s, "lock")
	// gRPC closes the silent connection about 15 s after the cut; until
	// then the client's requests go to it in turn with the others'.
	const bound = 3 * time.Second // a few tries of 500 ms on a loaded machine
	for round := range 6 {
		revoke(ctx, t, admin, s.ID())
		<-s.Done()
		began := time.Now()
		actx, acancel := context.WithTimeout(ctx, 20*time.Second)
		l, err := m.Acquire(actx)
		acancel()
		if took := time.Since(began); err != nil || took > bound {
			t.Fatalf("round %d: Acquire on a Session re-granting its lease: %v after %v (bound %v)", round, err, took, bound)
		}
		// A contender whose ctx ends while waiting deletes its key.
		const wait = 500 * time.Millisecond
		began = time.Now()
		wctx, wcancel := context.WithTimeout(ctx, wait)
		_, err = m.Acquire(wctx)
		wcancel()
		if took := time.Since(began); !errors.Is(err, context.DeadlineExceeded) || took > wait+bound {
			t.Fatalf("round %d: Acquire with a %v ctx behind a holder: %v after %v (bound %v)", round, wait, err, took, wait+bound)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("round %d: Release: %v", round, err)
		}
	}
}

// revoke revokes the etcd lease id through admin, a client of every member
// directly, sending it again while a try goes unanswered (to the member
// cut off from the others).
func revoke(ctx context.Context, t *testing.T, admin *clientv3.Client, id clientv3.LeaseID) {
	t.Helper()
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := admin.Revoke(rctx, id)
		cancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("revoking lease %x: %v", int64(id), err)
		}
	}
}
