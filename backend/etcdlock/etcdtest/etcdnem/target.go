// Package etcdnem puts package etcdlock under the nemesis (package
// testkit/nemesis): NewTarget makes a nemesis.Target of an
// etcdtest.Cluster, whose clients are etcdlock Sessions on all three
// members, each behind the engine's FaultProxy and then the member's own
// front proxy, and whose faults are real process and network actions on
// the members (faults.go). The engine brings the generic client faults
// (cut, blackhole, latency, pause of a client) and the checks.
package etcdnem

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// DefaultTTL is the etcd lease TTL of the clients when NewTarget is given
// none: the tests' TTL (a holder gives its lease up 2 s after the send of
// its newest acknowledged keep-alive; the server expires it no sooner than
// 3 s after it received it).
const DefaultTTL = 3 * time.Second

// Target is the nemesis.Target of etcdlock on an etcdtest.Cluster.
type Target struct {
	c   *etcdtest.Cluster
	ttl time.Duration
	log *slog.Logger

	mu       sync.Mutex
	base     string
	leases   map[clientv3.LeaseID]bool // baseline of Prepare
	watchers int                       // baseline of Prepare
	granted  time.Duration             // the TTL the server granted the first client
}

var _ nemesis.Target = (*Target)(nil)

// NewTarget returns the Target of etcdlock on c, whose clients hold etcd
// leases of ttl (0: DefaultTTL). The caller closes the Target, then c.
func NewTarget(c *etcdtest.Cluster, ttl time.Duration) *Target {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Target{c: c, ttl: ttl, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// Name is "etcd".
func (t *Target) Name() string { return "etcd" }

// Prepare deletes every key under base and records the leases and the
// watchers the cluster has now, as the baselines of Leftovers.
func (t *Target) Prepare(ctx context.Context, base string) error {
	admin, err := t.adminClient()
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.Delete(ctx, base+"/", clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("etcdnem: clearing %s: %w", base, err)
	}
	ls, err := admin.Leases(ctx)
	if err != nil {
		return fmt.Errorf("etcdnem: listing leases: %w", err)
	}
	leases := map[clientv3.LeaseID]bool{}
	for _, l := range ls.Leases {
		leases[l.ID] = true
	}
	w, err := watchers(ctx, t.c)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.base, t.leases, t.watchers = base, leases, w
	t.mu.Unlock()
	return nil
}

// adminClient opens a client of the members' own ports (no partition or
// proxy touches it) for one action; the caller closes it. None is kept
// open: its connections to restarted members would be goroutines the
// engine's leak check counts.
func (t *Target) adminClient() (*clientv3.Client, error) { return etcdtest.NewDirectClient(t.c) }

// Connect opens client i: an etcdlock Session on every member's endpoint
// (the members' front proxies, which a partition blackholes), every
// connection dialed through p, with the Target's TTL and the run's base as
// its key prefix.
func (t *Target) Connect(ctx context.Context, i int, p *serverkit.FaultProxy) (nemesis.Client, error) {
	t.mu.Lock()
	base := t.base
	t.mu.Unlock()
	dial := func(ctx context.Context, addr string) (net.Conn, error) { return p.DialContext(ctx, "tcp", addr) }
	s, err := etcdlock.Connect(ctx, t.c.URL(base), etcdlock.WithTTL(t.ttl), etcdlock.WithDialer(dial),
		etcdlock.WithLogger(t.log.With("client", i)))
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.granted == 0 {
		t.granted = s.TTL()
	}
	t.mu.Unlock()
	return &client{s: s, base: base}, nil
}

// SessionTimeout is the lease TTL the server granted: it expires a lease no
// sooner than that after the newest keep-alive it received
// (docs/backends.md), and with it the holder's key, which lets the next
// contender in.
func (t *Target) SessionTimeout() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.granted > 0 {
		return t.granted
	}
	return t.ttl
}

// Registers is nil: no fenced register is kept in etcd itself yet.
func (t *Target) Registers() []nemesis.Register { return nil }

// Heal ends every partition and pause, restarts killed members, and
// returns once every member is healthy.
func (t *Target) Heal(ctx context.Context) error { return t.c.HealAll(ctx) }

// Leftovers lists the keys left under the run's base, the leases the
// cluster has beyond those of Prepare's baseline, and watchers beyond its
// baseline (the sum over the members of etcd's watcher gauge).
func (t *Target) Leftovers(ctx context.Context) ([]string, error) {
	admin, err := t.adminClient()
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	t.mu.Lock()
	base, baseLeases, baseWatchers := t.base, t.leases, t.watchers
	t.mu.Unlock()
	var out []string
	keys, err := admin.Get(ctx, base+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	for _, kv := range keys.Kvs {
		out = append(out, fmt.Sprintf("key %s (create revision %d, lease %x)", kv.Key, kv.CreateRevision, kv.Lease))
	}
	ls, err := admin.Leases(ctx)
	if err != nil {
		return nil, err
	}
	for _, l := range ls.Leases {
		if !baseLeases[l.ID] {
			out = append(out, fmt.Sprintf("lease %x", l.ID))
		}
	}
	w, err := watchers(ctx, t.c)
	if err != nil {
		return nil, err
	}
	if w > baseWatchers {
		out = append(out, fmt.Sprintf("%d watchers on the members, %d before the run", w, baseWatchers))
	}
	return out, nil
}

// Diagnose lists each member's view (leader, term, revision) and the keys
// of the lock with their leases and those leases' remaining TTL.
func (t *Target) Diagnose(ctx context.Context) []string {
	admin, err := t.adminClient()
	if err != nil {
		return []string{err.Error()}
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out []string
	for i, ep := range t.c.DirectEndpoints() {
		st, err := admin.Status(ctx, ep)
		if err != nil {
			out = append(out, fmt.Sprintf("member %d: %v", i, err))
			continue
		}
		out = append(out, fmt.Sprintf("member %d: id %x leader %x term %d revision %d", i, st.Header.MemberId, st.Leader, st.RaftTerm, st.Header.Revision))
	}
	t.mu.Lock()
	base := t.base
	t.mu.Unlock()
	keys, err := admin.Get(ctx, base+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return append(out, fmt.Sprintf("keys under %s: %v", base, err))
	}
	for _, kv := range keys.Kvs {
		ttl := "no lease"
		if kv.Lease != 0 {
			if r, err := admin.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err == nil {
				ttl = fmt.Sprintf("lease %x ttl %d s", kv.Lease, r.TTL)
			}
		}
		out = append(out, fmt.Sprintf("key %s create revision %d: %s", kv.Key, kv.CreateRevision, ttl))
	}
	return out
}

// IgnoreLeaks names the goroutines of the cluster itself that a fault
// starts and that live as long as the cluster (not the run): the reaper of
// a restarted member, the forwarding of a new peer or client connection
// (the member-side proxies; the engine's own client proxies are closed,
// with all their goroutines, before its check).
func (t *Target) IgnoreLeaks() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest.(*Cluster).startMember.func1"),
		goleak.IgnoreAnyFunction("github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest.(*peerNet).forward"),
		goleak.IgnoreAnyFunction("github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest.(*peerNet).forward.func1"),
		goleak.IgnoreAnyFunction("github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest.(*peerNet).forward.func2"),
		goleak.IgnoreAnyFunction("github.com/zkrecipes/zkrecipes/testkit/serverkit.(*proxyConn).pump.func1"),
		goleak.IgnoreAnyFunction("github.com/zkrecipes/zkrecipes/testkit/serverkit.(*proxyConn).pump.func2"),
		goleak.IgnoreAnyFunction("github.com/zkrecipes/zkrecipes/testkit/serverkit.(*proxyConn).swallow"),
	}
}

// Close does nothing: the Target keeps no connection open between its
// actions, and the cluster is the caller's.
func (t *Target) Close() error { return nil }

// client is one etcdlock Session.
type client struct {
	s    *etcdlock.Session
	base string
}

// Lock returns the etcdlock mutex on name, which must be under the run's
// base: the Session's prefix is the base, so the lock's keys are
// base/<rest>/_lock_<id>.
func (c *client) Lock(name string) (recipe.Lock, error) {
	rel, ok := strings.CutPrefix(name, c.base+"/")
	if !ok {
		return nil, fmt.Errorf("etcdnem: lock %q is not under the run's base %q", name, c.base)
	}
	return etcdlock.New(c.s, rel)
}

func (c *client) Close() error { return c.s.Close() }
