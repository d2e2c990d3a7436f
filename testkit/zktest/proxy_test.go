package zktest

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

func TestFaultProxyCutSessionSurvives(t *testing.T) {
	c := Shared(t)
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	conn, events := connect(t, c.Addrs(), 5*time.Second, p.Dial)
	node := c.Chroot() + "/x"
	if _, err := conn.Create(node, []byte("1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	sid := conn.SessionID()

	p.Cut()
	if _, _, err := conn.Get(node); err == nil {
		t.Fatal("Get succeeded while the connection was cut")
	} else {
		t.Logf("Get during Cut: %v", err)
	}

	p.Resume()
	waitState(t, events, zk.StateHasSession, 10*time.Second)
	if got := conn.SessionID(); got != sid {
		t.Fatalf("session changed from %x to %x", sid, got)
	}
	if b, _, err := conn.Get(node); err != nil || string(b) != "1" {
		t.Fatalf("Get after Resume = %q, %v", b, err)
	}
}

func TestFaultProxyBlackholeExpiresSession(t *testing.T) {
	c := Shared(t)
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	conn, events := connect(t, c.Addrs(), 600*time.Millisecond, p.Dial)
	node := c.Chroot() + "/ephemeral"
	if _, err := conn.Create(node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	sid := conn.SessionID()

	observer, _ := connect(t, c.Addrs(), 5*time.Second, nil)
	ok, _, watch, err := observer.ExistsW(node)
	if err != nil || !ok {
		t.Fatalf("ExistsW = %v, %v", ok, err)
	}

	p.Blackhole()
	start := time.Now()
	select {
	case ev := <-watch:
		if ev.Type != zk.EventNodeDeleted {
			t.Fatalf("watch event %v, want node deleted", ev)
		}
		t.Logf("ephemeral node deleted %v after Blackhole", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not expire at the server during the blackhole")
	}

	p.Resume()
	waitState(t, events, zk.StateExpired, 10*time.Second)
	waitState(t, events, zk.StateHasSession, 10*time.Second)
	if conn.SessionID() == sid {
		t.Fatal("the client kept its expired session id")
	}
}
