package etcdlock_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// testTTL is the etcd lease TTL of the tests' sessions: the client gives a
// lease up 2 s after the send of its newest acknowledged keep-alive, the
// server expires it no sooner than 3 s after it received it.
const testTTL = 3 * time.Second

// quiet discards the sessions' logs: the tests check outcomes, and lease
// losses are expected in most of them.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is one test's view of the shared server: its own key prefix and an
// inspector client that no fault proxy stands in front of.
type env struct {
	srv    *etcdtest.Server
	prefix string
	in     *clientv3.Client
	opts   []etcdlock.Option // every connect's first options (WithTLS for the TLS server)
}

func newEnv(t testing.TB) *env {
	t.Helper()
	srv := etcdtest.Shared(t)
	return &env{srv: srv, prefix: etcdtest.Prefix(t, srv), in: srv.Client(t)}
}

// connect opens a Session for the test (closed at cleanup) through its own
// FaultProxy, which it returns.
func (e *env) connect(t testing.TB, opts ...etcdlock.Option) (*etcdlock.Session, *serverkit.FaultProxy) {
	t.Helper()
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close) // after the Session's Close (cleanups run last-in first-out)
	dial := func(ctx context.Context, addr string) (net.Conn, error) { return p.DialContext(ctx, "tcp", addr) }
	opts = append(append([]etcdlock.Option{etcdlock.WithTTL(testTTL), etcdlock.WithLogger(quiet), etcdlock.WithDialer(dial)}, e.opts...), opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := etcdlock.Connect(ctx, e.srv.URL(e.prefix), opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, p
}

// mutex returns the lock named name on s, failing the test on an error.
func mutex(t testing.TB, s *etcdlock.Session, name string) *etcdlock.Mutex {
	t.Helper()
	m, err := etcdlock.New(s, name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// keys counts the keys of the lock named name, through the inspector: its
// contenders' keys, and those of its lock-delay (WithLockDelay) that no
// live contender accounts for: a serving key, a held record naming a key
// that is gone.
func (e *env) keys(ctx context.Context, name string) (int, error) {
	dir := e.prefix + "/" + name + "/"
	resp, err := e.in.Txn(ctx).Then(clientv3.OpGet(dir+"_lock_", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(dir+"_lockdelay_held"), clientv3.OpGet(dir+"_lockdelay_serving", clientv3.WithCountOnly())).Commit()
	if err != nil {
		return 0, err
	}
	live := map[string]bool{}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		live[string(kv.Key)] = true
	}
	n := len(live) + int(resp.Responses[2].GetResponseRange().Count)
	if held := resp.Responses[1].GetResponseRange().Kvs; len(held) > 0 && !live[string(held[0].Value)] {
		n++
	}
	return n, nil
}

// harness is the locktest.Harness of etcdlock: every client has its own
// Session (testTTL) through its own FaultProxy.
type harness struct{ e *env }

func (h *harness) NewClient(tb testing.TB, lock string) locktest.Client {
	tb.Helper()
	s, p := h.e.connect(tb)
	return &lockClient{Mutex: mutex(tb, s, "locktest/"+lock), p: p}
}

func (h *harness) Leftovers(ctx context.Context, lock string) (int, error) {
	return h.e.keys(ctx, "locktest/"+lock)
}

// LeaseTime: a crashed holder's last keep-alive reached the server at most
// TTL/6 (plus a round trip) before the crash, and the server expires a lease
// a full TTL after the last keep-alive it received (checking every 500 ms),
// so the lock is freed between 5/6 TTL and TTL + 0.5 s after the crash. Min
// is half the TTL; Max leaves 5 s of slack for a loaded 2-core machine.
func (h *harness) LeaseTime() locktest.LeaseTime {
	return locktest.LeaseTime{Min: testTTL / 2, Max: testTTL + 5*time.Second}
}

// lockClient is a lock on its own Session, behind its own FaultProxy.
type lockClient struct {
	*etcdlock.Mutex
	p *serverkit.FaultProxy
}

// Crash models a killed process: closing the proxy closes the client's
// connections as the kernel would and makes every later dial fail. Nothing
// reaches the server, which expires the lease one TTL after the last
// keep-alive; that is what frees the lock.
func (c *lockClient) Crash() { c.p.Close() }

// CutOff is a network partition: connections stay open, nothing is
// forwarded either way.
func (c *lockClient) CutOff() { c.p.Blackhole() }

// Heal ends the partition; the client's connections are closed and it dials
// again.
func (c *lockClient) Heal() { c.p.Resume() }
