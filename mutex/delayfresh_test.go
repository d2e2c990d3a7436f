package mutex_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/rtest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestLockDelayFreshProcesses: after an unclean end, contenders that each
// live for one TryAcquire (a cron job: a new Session and Mutex every run)
// get the lock about d after the loss. The delay's start is kept on the
// server (the stamped marker's Ctime): a new Mutex does not restart it.
func TestLockDelayFreshProcesses(t *testing.T) {
	t.Parallel()
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
			if got := recipe.LockDelayServed(l); got != testDelay {
				t.Errorf("LockDelayServed = %v, want %v (the delay kept the lock out)", got, testDelay)
			}
			release(t, l)
			zktest.Eventually(t, 5*time.Second, "the lock directory empty", func() bool { return len(in.Children(dir)) == 0 })
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
