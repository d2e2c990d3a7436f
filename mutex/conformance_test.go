package mutex_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/recipe/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// confTimeout is the session timeout of the conformance clients: the largest
// the shared server allows (20 ticks of 100 ms), so that the gap between a
// holder giving its lease up (2/3 of it after the last reply) and the server
// expiring its session (all of it) is as wide as possible on a loaded machine.
const confTimeout = 2 * time.Second

// TestConformance runs the backend-neutral conformance suite (recipe/locktest)
// against the exclusive locks of this package: the mutex, the write side of
// the read-write lock, and a semaphore with one lease. Every client has its
// own session through its own FaultProxy. The three run in parallel, each on
// its own chroot.
func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name string
		lock func(testing.TB, *recipe.Session, string) recipe.Lock
	}{
		{"Mutex", func(tb testing.TB, s *recipe.Session, p string) recipe.Lock { return newMutex(tb, s, p) }},
		{"RWWriteSide", func(tb testing.TB, s *recipe.Session, p string) recipe.Lock {
			rw, err := mutex.NewRW(s, p)
			if err != nil {
				tb.Fatal(err)
			}
			return rw.WriteLock()
		}},
		{"SemaphoreOfOne", func(tb testing.TB, s *recipe.Session, p string) recipe.Lock {
			sem, err := mutex.NewSemaphore(s, p, 1)
			if err != nil {
				tb.Fatal(err)
			}
			return sem
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cl := zktest.Shared(t)
			locktest.Run(t, &zkHarness{cl: cl, in: inspect(t, cl), lock: c.lock})
		})
	}
}

type zkHarness struct {
	cl   *zktest.Cluster
	in   *zktest.Inspector
	lock func(testing.TB, *recipe.Session, string) recipe.Lock
}

// lockPath is the lock directory of the suite's lock named name.
func lockPath(name string) string { return "/locktest/" + name }

func (h *zkHarness) NewClient(tb testing.TB, lock string) locktest.Client {
	tb.Helper()
	p := zktest.NewFaultProxy()
	tb.Cleanup(p.Close) // after the session's Close (cleanups run last-in first-out)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := recipe.Connect(ctx, h.cl.Servers(), recipe.WithDialer(p.Dial), recipe.WithSessionTimeout(confTimeout))
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	if got := s.SessionTimeout(); got != confTimeout {
		tb.Fatalf("negotiated session timeout %v, want %v", got, confTimeout)
	}
	return &zkClient{Lock: h.lock(tb, s, lockPath(lock)), p: p}
}

// Leftovers counts the znodes in the lock directory, through the inspector's
// own connection (not through any client's proxy).
func (h *zkHarness) Leftovers(_ context.Context, lock string) (int, error) {
	c, _, err := h.in.Conn().Children(h.cl.Chroot() + lockPath(lock))
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil
	}
	return len(c), err
}

// LeaseTime: a crashed holder's session is expired by the server one session
// timeout after the last request it received, and the client pings every
// third of the timeout, so the lock is freed between 2/3 and 1 timeout after
// the crash (plus the server's one-tick expiry granularity). Min is 1/3 of
// the timeout; Max leaves 5 s of slack for a loaded 2-core machine.
func (h *zkHarness) LeaseTime() locktest.LeaseTime {
	return locktest.LeaseTime{Min: confTimeout / 3, Max: confTimeout + 5*time.Second}
}

// zkClient is a lock on its own session, behind its own FaultProxy.
type zkClient struct {
	recipe.Lock
	p *zktest.FaultProxy
}

// Crash models a killed process: closing the proxy closes the client's TCP
// connection as the kernel would and makes every later dial fail. No
// closeSession reaches the server, which expires the session after its
// timeout; that is what frees the lock. (The Session object itself is closed
// at cleanup, when its requests can no longer reach anyone.)
func (c *zkClient) Crash() { c.p.Close() }

// CutOff is a network partition: the connection stays open but nothing is
// forwarded either way, so the client notices only through its own timeouts.
func (c *zkClient) CutOff() { c.p.Blackhole() }

// Heal ends the partition; the client reconnects (with a new session if the
// server expired the old one).
func (c *zkClient) Heal() { c.p.Resume() }
