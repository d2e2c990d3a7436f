package redislock_test

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// TestMain stops the shared servers after the tests. The parallel tests
// (the conformance suites, the cut-offs, crashes and lock-delays, on
// servers or locks of their own) spend their time waiting for keys to expire, not
// computing: they run up to 8 at once (go test -parallel still wins), not
// GOMAXPROCS (2 here), which would queue them. The tests that bound how
// long something takes (connect errors, refusals) stay serial: they run
// before the parallel ones, alone in the package.
func TestMain(m *testing.M) {
	if err := flag.Set("test.parallel", "8"); err != nil {
		panic(err)
	}
	redistest.Main(m)
}

// confTTL is the TTL of the conformance clients: a holder's lease context
// ends 2/3 of it after its last successful renewal was sent, the server
// keeps the key for all of it, so the 2/3 s in between must absorb the
// timer delays of a loaded 2-core machine (the ZooKeeper suite's 2 s
// sessions leave the same margin).
const confTTL = 2 * time.Second

// harness is the locktest.Harness of the Redis backend: every client has its
// own Session through its own FaultProxy.
type harness struct {
	srv *redistest.Server
	in  *redislock.Session // direct, for key names
	rdb *redis.Client      // direct, for Leftovers
	// opts are every client's options (WithTLS on the TLS server).
	opts []redislock.Option
}

func newHarness(t *testing.T) *harness {
	srv := redistest.Start(t)
	return &harness{srv: srv, in: connect(t, srv, nil), rdb: srv.Client(t)}
}

// connect opens a session on srv with confTTL and the server's key prefix,
// through p unless p is nil, closed at tb's cleanup.
func connect(tb testing.TB, srv *redistest.Server, p *serverkit.FaultProxy, opts ...redislock.Option) *redislock.Session {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts = append([]redislock.Option{redislock.WithTTL(confTTL), redislock.WithKeyPrefix(srv.KeyPrefix())}, opts...)
	if p != nil {
		opts = append(opts, redislock.WithDialer(p.DialContext))
	}
	s, err := redislock.Connect(ctx, srv.URL(), opts...)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func mustNew(tb testing.TB, s *redislock.Session, name string) *redislock.Mutex {
	tb.Helper()
	m, err := redislock.New(s, name)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func (h *harness) NewClient(tb testing.TB, lock string) locktest.Client {
	tb.Helper()
	p := serverkit.NewFaultProxy()
	tb.Cleanup(p.Close) // after the session's Close (cleanups run last-in first-out)
	s := connect(tb, h.srv, p, h.opts...)
	return &client{Lock: mustNew(tb, s, lock), p: p}
}

// Leftovers counts the lock's key (there is one per grant; waiters store
// nothing), read directly from the server.
func (h *harness) Leftovers(ctx context.Context, lock string) (int, error) {
	m, err := redislock.New(h.in, lock)
	if err != nil {
		return 0, err
	}
	n, err := h.rdb.Exists(ctx, m.Key()).Result()
	return int(n), err
}

// LeaseTime: a crashed holder's key expires the TTL after its last renewal
// ran, and renewals are sent every third of the TTL, so the lock is freed
// between 2/3 of the TTL and the TTL after the crash (plus the waiter's
// re-check jitter, at most a tenth of the TTL). Min is half the TTL; Max
// leaves 5 s of slack for a loaded machine.
func (h *harness) LeaseTime() locktest.LeaseTime {
	return locktest.LeaseTime{Min: confTTL / 2, Max: confTTL + 5*time.Second}
}

// client is a lock on its own session, behind its own FaultProxy.
type client struct {
	recipe.Lock
	p *serverkit.FaultProxy
}

// Crash models a killed process: closing the proxy closes the client's
// connections as the kernel would, and every later dial fails. Nothing is
// released; the server expires the key after its TTL. (The Session itself
// is closed at cleanup, when nothing it sends reaches the server.)
func (c *client) Crash() { c.p.Close() }

// CutOff is a partition: connections stay open but nothing is forwarded, so
// the client notices only through its own deadlines.
func (c *client) CutOff() { c.p.Blackhole() }

// Heal ends the partition: the blackholed connections are closed and the
// client dials again.
func (c *client) Heal() { c.p.Resume() }

func TestConformance(t *testing.T) {
	t.Parallel()
	locktest.Run(t, newHarness(t))
}

// TestHolderConformance: Mutex as a recipe.HolderObserver
// (locktest.RunHolder), observed from a Session of its own that polls
// every 50 ms.
func TestHolderConformance(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	locktest.RunHolder(t, h, func(tb testing.TB, lock string) recipe.HolderObserver {
		return mustNew(tb, connect(tb, h.srv, nil, redislock.WithHolderPoll(50*time.Millisecond)), lock)
	})
}
