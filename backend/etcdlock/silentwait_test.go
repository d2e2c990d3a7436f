package etcdlock_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
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

// A watch can stay silent while its key changes: here the member serving it
// answers no client (its peers still reach it), so the event never reaches
// the client, and gRPC closes the silent connection only after about 15 s. A waiter whose predecessor goes meanwhile is granted
// within about a TTL anyway, and a holder whose key is deleted meanwhile
// learns it as soon: each reads again after silentWatchLimit. The nemesis
// found the kind: after a member's pause, a lock free for 6 s with every
// contender asleep in the wait for a deletion that had happened.
func TestSilentWatchDoesNotStallWaiterOrHolder(t *testing.T) {
	c := etcdtest.StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin := c.Client(t)
	connect := func() *etcdlock.Session {
		s, err := etcdlock.Connect(ctx, c.URL("/silentwatch"), etcdlock.WithTTL(testTTL), etcdlock.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	const bound = 2*testTTL + 2*time.Second // gRPC's own notice: about 15 s
	sa, sb := connect(), connect()
	a, err := mutex(t, sa, "lock").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := watchers(ctx, t, c)
	got := make(chan error, 1)
	var b recipe.Lease
	go func() {
		var err error
		b, err = mutex(t, sb, "lock").Acquire(ctx)
		got <- err
	}()
	silenceWatcher(ctx, t, c, before, 2) // B's: its predecessor's key and its own
	began := time.Now()
	revoke(ctx, t, admin, sa.ID())
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(bound):
		t.Fatalf("waiter not granted within %v of its predecessor's end, its watch silent", bound)
	}
	t.Logf("waiter granted %v after its predecessor's end", time.Since(began).Round(time.Millisecond))
	_ = a.Release(ctx)
	c.Heal()

	before = watchers(ctx, t, c)
	h, err := mutex(t, sa, "other").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	silenceWatcher(ctx, t, c, before, 1) // the holder's, on its own key
	began = time.Now()
	if _, err := admin.Delete(ctx, "/silentwatch/other/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Context().Done():
		if err := context.Cause(h.Context()); !errors.Is(err, recipe.ErrNodeDeleted) {
			t.Fatalf("holder's lease ended with %v, want recipe.ErrNodeDeleted", err)
		}
	case <-time.After(bound):
		t.Fatalf("holder did not notice its key's deletion within %v, its watch silent", bound)
	}
	t.Logf("holder noticed %v after its key's deletion", time.Since(began).Round(time.Millisecond))
	c.Heal()
	_ = b.Release(ctx)
}

// silenceWatcher waits until one member serves n more watches than in
// before, and silences that member (etcdtest.Cluster.Silence).
func silenceWatcher(ctx context.Context, t *testing.T, c *etcdtest.Cluster, before []int, n int) {
	t.Helper()
	member := -1
	serverkit.Eventually(t, 10*time.Second, "the new watches registered", func() bool {
		for i, w := range watchers(ctx, t, c) {
			if w-before[i] == n {
				member = i
				return true
			}
		}
		return false
	})
	if err := c.Silence(member); err != nil {
		t.Fatal(err)
	}
}

// watchers returns the number of watches each member serves, from its
// metrics (read on its own port, which no partition touches).
func watchers(ctx context.Context, t *testing.T, c *etcdtest.Cluster) []int {
	t.Helper()
	var out []int
	for _, ep := range c.DirectEndpoints() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ep+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		n := -1
		for _, l := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(l, "etcd_debugging_mvcc_watcher_total "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					t.Fatalf("%s: %q: %v", ep, l, err)
				}
				n = int(f)
			}
		}
		if n < 0 {
			t.Fatalf("%s: no etcd_debugging_mvcc_watcher_total in its metrics", ep)
		}
		out = append(out, n)
	}
	return out
}
