package rtest

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// ConfTimeout is the session timeout of the conformance clients: the
// largest the shared server allows (20 ticks of 100 ms), so that the gap
// between a holder giving its lease up (2/3 of it after the last reply) and
// the server expiring its session (all of it) is as wide as possible on a
// loaded machine.
const ConfTimeout = 2 * time.Second

// LockHarness is the locktest.Harness of a ZooKeeper recipe: every client
// has its own session (ConfTimeout) through its own FaultProxy, and Lock
// makes the recipe.Lock under test on that session over a lock directory.
type LockHarness struct {
	Cluster *zktest.Cluster
	In      *zktest.Inspector // leftovers are counted through it, not through a client's proxy
	Lock    func(tb testing.TB, s *zookeeper.Session, dir string) recipe.Lock
	// TLS, if set, makes every client connect to the cluster's TLS ports
	// (zktest.WithTLS) with it, through its FaultProxy.
	TLS *tls.Config
}

// LockPath is the lock directory of the suite's lock named name.
func LockPath(name string) string { return "/locktest/" + name }

// NewClient implements locktest.Harness.
func (h *LockHarness) NewClient(tb testing.TB, lock string) locktest.Client {
	tb.Helper()
	p := serverkit.NewFaultProxy()
	tb.Cleanup(p.Close) // after the session's Close (cleanups run last-in first-out)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	servers, opts := h.Cluster.Servers(), []zookeeper.Option{zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(ConfTimeout)}
	if h.TLS != nil {
		servers, opts = h.Cluster.SecureServers(), append(opts, zookeeper.WithTLS(h.TLS))
	}
	s, err := zookeeper.Connect(ctx, servers, opts...)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	if got := s.SessionTimeout(); got != ConfTimeout {
		tb.Fatalf("negotiated session timeout %v, want %v", got, ConfTimeout)
	}
	return &lockClient{Lock: h.Lock(tb, s, LockPath(lock)), p: p}
}

// Leftovers counts the znodes in the lock directory, through the inspector's
// own connection.
func (h *LockHarness) Leftovers(_ context.Context, lock string) (int, error) {
	c, _, err := h.In.Conn().Children(h.Cluster.Chroot() + LockPath(lock))
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
func (h *LockHarness) LeaseTime() locktest.LeaseTime {
	return locktest.LeaseTime{Min: ConfTimeout / 3, Max: ConfTimeout + 5*time.Second}
}

// lockClient is a lock on its own session, behind its own FaultProxy.
type lockClient struct {
	recipe.Lock
	p *serverkit.FaultProxy
}

// Crash models a killed process: closing the proxy closes the client's TCP
// connection as the kernel would and makes every later dial fail. No
// closeSession reaches the server, which expires the session after its
// timeout; that is what frees the lock. (The Session object itself is closed
// at cleanup, when its requests can no longer reach anyone.)
func (c *lockClient) Crash() { c.p.Close() }

// CutOff is a network partition: the connection stays open but nothing is
// forwarded either way, so the client notices only through its own timeouts.
func (c *lockClient) CutOff() { c.p.Blackhole() }

// Heal ends the partition; the client reconnects (with a new session if the
// server expired the old one).
func (c *lockClient) Heal() { c.p.Resume() }
