package etcdlock_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/testkit/grouptest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// TestGroupConformance runs the backend-neutral group membership suite
// (testkit/grouptest) against Group on the real server, with the same
// crash (proxy closed) and cut-off (proxy blackholed) hooks as the lock's
// suite.
func TestGroupConformance(t *testing.T) {
	t.Parallel()
	grouptest.Run(t, &groupHarness{e: newEnv(t)})
}

// groupHarness is the grouptest.Harness of Group: every client has its own
// Session (testTTL) through its own FaultProxy.
type groupHarness struct{ e *env }

// groupName is the name of the suite's group named name.
func groupName(name string) string { return "grouptest/" + name }

func (h *groupHarness) NewClient(tb testing.TB, name string) grouptest.Client {
	tb.Helper()
	s, p := h.e.connect(tb)
	g, err := etcdlock.NewGroup(s, groupName(name))
	if err != nil {
		tb.Fatal(err)
	}
	return &groupClient{Group: g, p: p}
}

// Leftovers counts the group's member keys (<prefix>/<name>/_member_<id>),
// through the inspector.
func (h *groupHarness) Leftovers(ctx context.Context, name string) (int, error) {
	resp, err := h.e.in.Get(ctx, h.e.prefix+"/"+groupName(name)+"/_member_", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return int(resp.Count), nil
}

// Bounds: a crashed member's key goes with its etcd lease, between 5/6 TTL
// and TTL + 0.5 s after the crash (as the lock's LeaseTime); a cut-off
// member's Registered context ends between 1/2 and 2/3 TTL after the cut.
// Min is half the TTL; the Max leave 5 s of slack for a loaded 2-core
// machine.
func (h *groupHarness) Bounds() grouptest.Bounds {
	return grouptest.Bounds{
		DeadVisible:   grouptest.Span{Min: testTTL / 2, Max: testTTL + 5*time.Second},
		CutOffContext: testTTL + 5*time.Second,
	}
}

// groupClient is a group on its own Session, behind its own FaultProxy.
type groupClient struct {
	*etcdlock.Group
	p *serverkit.FaultProxy
}

// Crash models a killed process: the proxy closes the client's connections
// and refuses new ones; the server expires the etcd lease one TTL after the
// last keep-alive.
func (c *groupClient) Crash() { c.p.Close() }

// CutOff is a network partition: connections stay open, nothing is
// forwarded either way.
func (c *groupClient) CutOff() { c.p.Blackhole() }

// Heal ends the partition; the client dials again.
func (c *groupClient) Heal() { c.p.Resume() }
