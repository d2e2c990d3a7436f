package mutex_test

import (
	"context"
	"errors"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestLockDelayFreshProcesses: after an unclean end, contenders that each
// live for one TryAcquire (a cron job: a new Session and Mutex every run)
// get the lock about d after the loss. The delay's start is kept on the
// server (the stamped marker's Ctime): a new Mutex does not restart it.
func TestLockDelayFreshProcesses(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(t *testing.T, s *zookeeper.Session, cl *zktest.Cluster, tap *zktest.SessionTap)
	}{
		{"SessionClose", func(_ *testing.T, s *zookeeper.Session, _ *zktest.Cluster, _ *zktest.SessionTap) { s.Close() }},
		{"SessionExpired", func(t *testing.T, _ *zookeeper.Session, cl *zktest.Cluster, tap *zktest.SessionTap) {
			id, pw, ok := tap.Session()
			if !ok {
				t.Fatal("no session seen by the tap")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := zktest.ExpireSession(ctx, cl.Addrs(), id, pw); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cl := zktest.Shared(t)
			in := zktest.Inspect(t, cl)
			sa, _, tap := proxied(t, cl)
			acquire(t, delayed(t, sa, testDelay))
			c.end(t, sa, cl, tap)
			lost := time.Now()
			l, at := tryFresh(t, cl, lost.Add(testDelay+5*time.Second))
			if got, ok := markerOf(t, cl, in); !ok || got != nodeName(l) {
				t.Errorf("marker while the fresh contender holds = %q (exists %v), want its node %s", got, ok, nodeName(l))
			}
			took := at.Sub(lost)
			t.Logf("granted %v after the unclean end (lock-delay %v)", took.Round(time.Millisecond), testDelay)
			if took < testDelay {
				t.Errorf("granted %v after the unclean end, sooner than the lock-delay %v", took, testDelay)
			}
			// The delay kept the lock out, but this contender waited
			// for nothing: the TryAcquires during it got ErrLocked.
			if got := recipe.LockDelayServed(l); got != 0 {
				t.Errorf("LockDelayServed = %v, want 0 (what this TryAcquire waited)", got)
			}
			release(t, l)
			serverkit.Eventually(t, 5*time.Second, "the lock directory empty", func() bool { return len(in.Children(dir)) == 0 })
		})
	}
}

// tryFresh runs TryAcquire every 200 ms, each from a new Session and
// Mutex closed after it, until one is granted (its lease and when; its
// Session lives until the test ends) or the deadline passes (a fatal
// error). A refusal must be recipe.ErrLocked; after the first, the marker
// must be stamped.
func tryFresh(t *testing.T, cl *zktest.Cluster, deadline time.Time) (recipe.Lease, time.Time) {
	t.Helper()
	in := zktest.Inspect(t, cl)
	for tries := 1; time.Now().Before(deadline); tries++ {
		s := rtest.Connect(t, cl)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := delayed(t, s, testDelay).TryAcquire(ctx)
		cancel()
		if err == nil {
			t.Logf("granted to fresh contender %d", tries)
			return l, time.Now()
		}
		s.Close()
		if !errors.Is(err, recipe.ErrLocked) {
			t.Fatalf("fresh contender %d: TryAcquire = %v, want recipe.ErrLocked", tries, err)
		}
		if got, ok := markerOf(t, cl, in); tries == 1 && (!ok || !strings.HasPrefix(got, "gone:")) {
			t.Errorf("marker after the first refused TryAcquire = %q (exists %v), want it stamped gone:<name>", got, ok)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no fresh contender's TryAcquire was granted by %v after the unclean end: each new Mutex restarted the lock-delay", testDelay+5*time.Second)
	return nil, time.Time{}
}

// TestLockDelayAbandonKeepsStart: a waiter that gives up while serving
// the delay does not restart it for a contender that arrives afterwards:
// that one is granted d after the loss on the server's clock, not d after
// its own arrival, and its LockDelayServed is what it waited, the rest
// (issue 37 item 12: it was the full d, on ZooKeeper only). The loss is
// timed before A's Close: the server deletes A's node before Close has its
// reply back, and B, told at once by its watch, may stamp the marker (the
// delay's start) first; A's link is slow, so that its reply always comes
// back after B's stamp (as the test's goroutine may on a loaded machine).
//
// Its delay is 3 s, not testDelay: C must arrive while the delay still
// runs (B gives up at 70 % of it), which a loaded machine did not leave
// 300 ms for.
func TestLockDelayAbandonKeepsStart(t *testing.T) {
	const abandonDelay = 3 * time.Second
	cl := zktest.Shared(t)
	sa, pa, _ := proxied(t, cl)
	acquire(t, delayed(t, sa, abandonDelay))
	bctx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	pb := acquireAsync(bctx, delayed(t, rtest.Connect(t, cl), abandonDelay))
	time.Sleep(200 * time.Millisecond) // B in line
	pa.SetLatency(200 * time.Millisecond)
	lost := time.Now()
	sa.Close() // unclean
	time.Sleep(time.Until(lost.Add(abandonDelay * 7 / 10)))
	gaveUp := time.Now()
	giveUp()
	if r := rtest.Await(t, pb, 10*time.Second); r.Err == nil {
		release(t, r.Lease)
		t.Fatalf("B was granted %v after the unclean end, before it gave up: no delay served?", r.At.Sub(lost))
	}
	mc := delayed(t, rtest.Connect(t, cl), abandonDelay)
	arrived := time.Now()
	r := rtest.Await(t, acquireAsync(context.Background(), mc), 10*time.Second)
	if r.Err != nil {
		t.Fatalf("C after B gave up: %v", r.Err)
	}
	if took, got := r.At.Sub(lost), recipe.LockDelayServed(r.Lease); took < abandonDelay || got <= 0 || got > abandonDelay {
		t.Errorf("C granted %v after the unclean end, LockDelayServed %v; want no sooner than %v, and a part of it served", took, got, abandonDelay)
	}
	if got, waited := recipe.LockDelayServed(r.Lease), r.At.Sub(arrived); got > waited {
		t.Errorf("C's LockDelayServed = %v, more than C waited in all (%v): it counts B's part", got, waited)
	}
	t.Logf("C granted %v after the unclean end (B gave up at %v)", r.At.Sub(lost).Round(time.Millisecond), gaveUp.Sub(lost).Round(time.Millisecond))
	// A delay started again by B's giving up, or by C's arrival after it,
	// would end no sooner than d after gaveUp.
	if since := r.At.Sub(gaveUp); since >= abandonDelay {
		t.Errorf("C granted %v after B gave up, not sooner than the lock-delay %v: B's giving up restarted the delay", since, abandonDelay)
	}
	release(t, r.Lease)
}

// TestLockDelayNoWriteFallsBack: with an ACL that grants no WRITE (the
// digest identity cdra, the world r), a contender cannot learn the server's now from a Set of the
// stamped marker: it counts the delay on its Mutex's own clock from its
// first sight, and is granted once that has passed.
func TestLockDelayNoWriteFallsBack(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create(path.Dir(dir), nil) // world ACL: the chroot's cleanup can delete below it
	acl := zk.DigestACL(zk.PermCreate|zk.PermDelete|zk.PermRead|zk.PermAdmin, "locker", "s3cr3t-zkr-delay")
	opts := []zookeeper.Option{
		zookeeper.WithAuth("digest", []byte("locker:s3cr3t-zkr-delay")),
		zookeeper.WithACL(append(acl, zk.WorldACL(zk.PermRead)...)),
	}
	sa := rtest.Connect(t, cl, opts...)
	acquire(t, delayed(t, sa, testDelay))
	sa.Close() // unclean
	c := delayed(t, rtest.Connect(t, cl, opts...), testDelay)
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
			t.Fatalf("TryAcquire during the delay: %v, want recipe.ErrLocked (a Set refused by the ACL falls back to the local clock)", err)
		}
		if got, _ := markerOf(t, cl, in); tries == 0 && !strings.HasPrefix(got, "gone:") {
			t.Errorf("marker after the first refused TryAcquire = %q, want it stamped", got)
		}
		if st := in.Stat(dir + "/" + markerName); st == nil || st.Version != 0 {
			t.Fatalf("marker stat after a refused TryAcquire = %+v, want version 0 (the ACL refuses the Set)", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if took := time.Since(first); took < testDelay {
		t.Errorf("TryAcquire granted %v after the first try, sooner than the lock-delay %v", took, testDelay)
	}
	if got := recipe.LockDelayServed(l); got != 0 {
		t.Errorf("LockDelayServed = %v, want 0 (what the granted TryAcquire waited)", got)
	}
	release(t, l)
}
