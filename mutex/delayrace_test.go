package mutex_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// The interleavings of the lock-delay marker with failures: a failure
// around the Release's multi (marker and node deleted in one step) or
// during the delay can only cause a delay, never skip one.

// proxied opens a Session (2 s timeout) through its own FaultProxy, with a
// SessionTap to expire it on demand.
func proxied(t *testing.T, cl *zktest.Cluster) (*zookeeper.Session, *serverkit.FaultProxy, *zktest.SessionTap) {
	t.Helper()
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close) // after the Session's Close
	tap := zktest.NewSessionTap()
	s := rtest.Connect(t, cl, zookeeper.WithDialer(tap.Dialer(p.Dial)), zookeeper.WithSessionTimeout(2*time.Second))
	return s, p, tap
}

// slowAddrs returns addresses that reach cl's servers through a
// FaultProxy of their own delaying each direction by latency (for
// zktest.ExpireSession: its reply then comes back late).
func slowAddrs(t *testing.T, cl *zktest.Cluster, latency time.Duration) []string {
	t.Helper()
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	p.SetLatency(latency)
	var addrs []string
	for _, a := range cl.Addrs() {
		addr, err := p.Listen(a)
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, addr)
	}
	return addrs
}

// releaseAsync runs l.Release (10 s) on a goroutine.
func releaseAsync(l recipe.Lease) <-chan error {
	ch := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ch <- l.Release(ctx)
	}()
	return ch
}

// holdAndQueue makes A (on sa) hold the lock and B (a fresh session)
// wait behind it, both with the test delay.
func holdAndQueue(t *testing.T, cl *zktest.Cluster, sa *zookeeper.Session) (recipe.Lease, <-chan rtest.Result) {
	t.Helper()
	la := acquire(t, delayed(t, sa, testDelay))
	ch := acquireAsync(context.Background(), delayed(t, rtest.Connect(t, cl), testDelay))
	time.Sleep(200 * time.Millisecond) // B in line
	return la, ch
}

func TestLockDelayRaces(t *testing.T) {
	t.Run("MarkerChangedUnderHolder", func(t *testing.T) {
		// The Release's multi fails on the marker's version: the node is
		// deleted alone, and the marker left costs the next holder a delay.
		t.Parallel()
		cl := zktest.Shared(t)
		in := zktest.Inspect(t, cl)
		la, ch := holdAndQueue(t, cl, rtest.Connect(t, cl))
		mpath := cl.Chroot() + dir + "/" + markerName
		data, _, err := in.Conn().Get(mpath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.Conn().Set(mpath, data, -1); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		release(t, la)
		expectDelayed(t, rtest.Await(t, ch, 10*time.Second), released, "B after a Release whose multi failed")
	})
	t.Run("ReleaseReplyLost", func(t *testing.T) {
		// The multi is applied but its reply is lost (the connection is
		// cut while the reply is held back): the retry finds the node gone
		// and the Release succeeds; the end was clean, B serves nothing.
		t.Parallel()
		cl := zktest.Shared(t)
		in := zktest.Inspect(t, cl)
		sa, pa, _ := proxied(t, cl)
		la, ch := holdAndQueue(t, cl, sa)
		node := la.(interface{ Path() string }).Path()
		pa.SetLatency(400 * time.Millisecond)
		done := releaseAsync(la)
		serverkit.Eventually(t, 5*time.Second, "the Release's multi applied", func() bool { return in.Stat(node) == nil })
		applied := time.Now()
		pa.SetLatency(0)
		pa.Cut() // the reply is still held back by the latency: lost
		pa.Resume()
		if err := <-done; err != nil {
			t.Errorf("Release after its reply was lost: %v, want nil", err)
		}
		expectPrompt(t, rtest.Await(t, ch, 10*time.Second), applied, "B after a clean Release whose reply was lost")
	})
	t.Run("ReleaseCutOffThenExpired", func(t *testing.T) {
		// The Release's multi never reaches the server (partition) and the
		// session expires: the marker stays, B serves the delay. The end is
		// timed before the expiry is asked for: the server ends the session
		// before ExpireSession has its reply back, and B, told at once by
		// its watch, may stamp the marker (the delay's start) first. The
		// expiry goes through a slow link, so its reply always comes back
		// after B's stamp (as the test's goroutine may on a loaded machine).
		t.Parallel()
		cl := zktest.Shared(t)
		sa, pa, tap := proxied(t, cl)
		la, ch := holdAndQueue(t, cl, sa)
		id, pw, ok := tap.Session()
		if !ok {
			t.Fatal("no session seen by the tap")
		}
		slow := slowAddrs(t, cl, 300*time.Millisecond)
		pa.Blackhole()
		defer pa.Resume()
		done := releaseAsync(la)
		time.Sleep(100 * time.Millisecond) // the multi is swallowed
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		lost := time.Now()
		if _, err := zktest.ExpireSession(ctx, slow, id, pw); err != nil {
			t.Fatal(err)
		}
		expectDelayed(t, rtest.Await(t, ch, 10*time.Second), lost, "B after a Release that never reached the server")
		select {
		case err := <-done:
			t.Logf("A's Release across the partition: %v", err)
		case <-time.After(10 * time.Second):
			t.Error("A's Release did not return within 10 s")
		}
	})
	t.Run("SuspendedWhileServing", func(t *testing.T) {
		// B's connection drops while it serves the delay: its grant ends
		// before it is handed out, it joins again and serves the rest,
		// counted from when it first saw the marker.
		t.Parallel()
		cl := zktest.Shared(t)
		in := zktest.Inspect(t, cl)
		sa := rtest.Connect(t, cl)
		acquire(t, delayed(t, sa, testDelay))
		sb, pb, _ := proxied(t, cl)
		ch := acquireAsync(context.Background(), delayed(t, sb, testDelay))
		time.Sleep(200 * time.Millisecond) // B in line
		lost := time.Now()
		sa.Close() // unclean
		time.Sleep(testDelay / 3)
		pb.Cut()
		time.Sleep(100 * time.Millisecond)
		pb.Resume()
		r := rtest.Await(t, ch, 10*time.Second)
		expectDelayed(t, r, lost, "B after a suspension during its delay")
		if took := r.At.Sub(lost); took > 3*testDelay {
			t.Errorf("B granted %v after the unclean end: the rest of the delay after its rejoin counts from its first sight of the marker", took)
		}
		release(t, r.Lease)
		serverkit.Eventually(t, 5*time.Second, "the lock directory empty", func() bool { return len(in.Children(dir)) == 0 })
	})
}
