package group_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/group"
	"github.com/zkrecipes/zkrecipes/testkit/grouptest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestConformance runs the backend-neutral group membership suite
// (testkit/grouptest) against Group on the shared server: every client has
// its own session (rtest.ConfTimeout) through its own FaultProxy, whose
// Close is the crash and whose Blackhole is the cut-off.
func TestConformance(t *testing.T) {
	cl := zktest.Shared(t)
	grouptest.Run(t, &confHarness{cl: cl, in: zktest.Inspect(t, cl)})
}

// confHarness is the grouptest.Harness of Group.
type confHarness struct {
	cl *zktest.Cluster
	in *zktest.Inspector // leftovers are counted through it, not through a client's proxy
}

// confDir is the directory of the suite's group named name.
func confDir(name string) string { return "/grouptest/" + name }

// NewClient implements grouptest.Harness.
func (h *confHarness) NewClient(tb testing.TB, name string) grouptest.Client {
	tb.Helper()
	p := serverkit.NewFaultProxy()
	tb.Cleanup(p.Close) // after the session's Close (cleanups run last-in first-out)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := zookeeper.Connect(ctx, h.cl.Servers(), zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(rtest.ConfTimeout))
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	if got := s.SessionTimeout(); got != rtest.ConfTimeout {
		tb.Fatalf("negotiated session timeout %v, want %v", got, rtest.ConfTimeout)
	}
	g, err := group.New(s, confDir(name))
	if err != nil {
		tb.Fatal(err)
	}
	return &confClient{Group: g, p: p}
}

// Leftovers counts the member nodes (kind "member-") in the group's
// directory, through the inspector's own connection.
func (h *confHarness) Leftovers(_ context.Context, name string) (int, error) {
	c, _, err := h.in.Conn().Children(h.cl.Chroot() + confDir(name))
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil
	}
	n := 0
	for _, name := range c {
		if strings.Contains(name, "-"+group.Kind) {
			n++
		}
	}
	return n, err
}

// Bounds: a crashed member's session is expired by the server one session
// timeout after the last request it received, and the client pings every
// third of the timeout, so its node goes between 2/3 and 1 timeout after
// the crash (plus the server's one-tick expiry granularity and the
// watcher's read). A cut-off member suspends at most 2/3 of the timeout
// after the last reply. Min is 1/3 of the timeout; the Max leave 5 s of
// slack for a loaded 2-core machine.
func (h *confHarness) Bounds() grouptest.Bounds {
	return grouptest.Bounds{
		DeadVisible:   grouptest.Span{Min: rtest.ConfTimeout / 3, Max: rtest.ConfTimeout + 5*time.Second},
		CutOffContext: rtest.ConfTimeout + 5*time.Second,
	}
}

// confClient is a group on its own session, behind its own FaultProxy.
type confClient struct {
	*group.Group
	p *serverkit.FaultProxy
}

// Crash models a killed process: closing the proxy closes the client's TCP
// connection as the kernel would and makes every later dial fail; the
// server expires the session after its timeout.
func (c *confClient) Crash() { c.p.Close() }

// CutOff is a network partition: the connection stays open but nothing is
// forwarded either way.
func (c *confClient) CutOff() { c.p.Blackhole() }

// Heal ends the partition; the client reconnects (with a new session if the
// server expired the old one).
func (c *confClient) Heal() { c.p.Resume() }
