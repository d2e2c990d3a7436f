package zkwire_test

import (
	"context"
	"encoding/binary"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// lastReplyZxid returns the zxid of the last reply (xid 0 or more, zxid
// above 0) among the frames after the handshake, 0 if none.
func lastReplyZxid(fs [][]byte) int64 {
	var z int64
	for _, f := range fs[min(len(fs), 1):] {
		if h, ok := zkwire.ParseReplyHeader(f); ok && h.Xid >= 0 && h.Zxid > 0 {
			z = h.Zxid
		}
	}
	return z
}

// TestAssumption_RepliesHandedUpWithoutZxid: go-zookeeper works with every
// reply's zxid zeroed (it returns no reply's zxid through its API), and
// zkwire records the real one: go-zookeeper's lastZxid stays 0, so its
// receive loop never writes it (docs/zookeeper-client.md#the-zxid-kept-by-zkwire).
func TestAssumption_RepliesHandedUpWithoutZxid(t *testing.T) {
	w := &wire{}
	conn, _, root := connect(t, w)
	dir := root + "/nozxid"
	if _, err := conn.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, _, ch, err := conn.GetW(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Set(dir, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.Type != zk.EventNodeDataChanged {
		t.Fatalf("watch fired %v", ev.Type)
	}
	if _, _, err := conn.Exists(dir); err != nil {
		t.Fatal(err)
	}
	raw, up := w.conn(0).read()
	if len(raw) != len(up) || len(raw) < 6 {
		t.Fatalf("%d frames read, %d handed up", len(raw), len(up))
	}
	for i, f := range raw[1:] {
		h, _ := zkwire.ParseReplyHeader(f)
		u, _ := zkwire.ParseReplyHeader(up[i+1])
		want := h
		if h.Xid >= 0 {
			want.Zxid = 0
		}
		if u != want {
			t.Fatalf("frame %d: header %+v read, %+v handed up, want %+v", i+1, h, u, want)
		}
	}
	if z := lastReplyZxid(raw); z == 0 || w.zxid.Last() != z {
		t.Fatalf("zkwire recorded zxid 0x%x; the last reply's was 0x%x", w.zxid.Last(), z)
	}
}

// TestAssumption_ReconnectCarriesZxidSeen: after a cut, the connect
// request carries the zxid of the last reply read before it, and so does
// set-watches, though a reply with a later zxid was read on the new
// connection before set-watches was written; a watch set before the cut
// fires for a change made while the client was disconnected.
func TestAssumption_ReconnectCarriesZxidSeen(t *testing.T) {
	w := &wire{holdSetWatches: true}
	var conn *zk.Conn
	connected := make(chan struct{})
	var queued atomic.Bool
	var root string
	callback := func(ev zk.Event) {
		if ev.Type != zk.EventSession || ev.State != zk.StateHasSession || w.connections() < 2 || !queued.CompareAndSwap(false, true) {
			return
		}
		<-connected
		go conn.Set(root+"/other", []byte("y"), -1) // queued before set-watches
		time.Sleep(300 * time.Millisecond)
	}
	conn, events, r := connect(t, w, zk.WithEventCallback(callback))
	root = r
	close(connected)
	for _, p := range []string{root + "/watched", root + "/other"} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	_, _, ch, err := conn.GetW(root + "/watched")
	if err != nil {
		t.Fatal(err)
	}
	w.dialHold.Lock()
	w.conn(0).Conn.Close()
	waitState(t, events, zk.StateDisconnected)
	raw, _ := w.conn(0).read()
	seen := lastReplyZxid(raw)
	if seen == 0 || w.zxid.Last() != seen {
		w.dialHold.Unlock()
		t.Fatalf("zkwire recorded 0x%x; the last reply read had 0x%x", w.zxid.Last(), seen)
	}
	other := zktest.Shared(t)
	c2, _, err := zk.Connect(other.Addrs(), 4*time.Second, zk.WithLogInfo(false))
	if err == nil {
		_, err = c2.Set(root+"/watched", []byte("changed while disconnected"), -1)
		c2.Close()
	}
	w.dialHold.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, events, zk.StateHasSession)
	eventually(t, "set-watches written", func() bool { return len(setWatches(w.last())) > 0 })
	rc := w.last()
	rc.mu.Lock()
	hello := rc.writes[0]
	rc.mu.Unlock()
	if got := int64(binary.BigEndian.Uint64(hello[8:16])); got != seen {
		t.Fatalf("connect request's lastZxidSeen 0x%x, want 0x%x", got, seen)
	}
	raw, _ = rc.read()
	if later := lastReplyZxid(raw); later <= seen {
		t.Fatalf("no reply with a later zxid than 0x%x read before set-watches (last 0x%x)", seen, later)
	}
	for _, p := range setWatches(rc) {
		if got := int64(binary.BigEndian.Uint64(p[12:20])); got != seen {
			t.Fatalf("set-watches' relativeZxid 0x%x, want 0x%x", got, seen)
		}
	}
	select {
	case ev := <-ch:
		if ev.Type != zk.EventNodeDataChanged {
			t.Fatalf("the watch fired %v, want a data change", ev.Type)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the watch set before the cut missed the change made while disconnected")
	}
}

// setWatches returns the set-watches requests written on rc.
func setWatches(rc *recConn) [][]byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var ps [][]byte
	for _, p := range rc.writes[1:] {
		if _, op, _ := zkwire.Request(p); op == zkwire.OpSetWatches {
			ps = append(ps, p)
		}
	}
	return ps
}

// TestAssumption_ServerRefusesZxidAhead: a server closes, unanswered, a
// connect request whose lastZxidSeen is ahead of its own, and answers one
// carrying a zxid it has: the lastZxidSeen zkwire writes is what keeps a
// client from going back in time.
func TestAssumption_ServerRefusesZxidAhead(t *testing.T) {
	w := &wire{}
	conn, _, root := connect(t, w)
	if _, _, err := conn.Exists(root); err != nil {
		t.Fatal(err)
	}
	addr := zktest.Shared(t).Addrs()[0]
	hello := func(zxid int64) ([]byte, error) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		req := zkwire.ConnectRequest(0, make([]byte, 16), 4*time.Second)
		binary.BigEndian.PutUint64(req[4:12], uint64(zxid))
		if err := zkwire.WriteFrame(c, req); err != nil {
			return nil, err
		}
		resp, err := zkwire.ReadFrame(c, 1<<10)
		if err == nil { // close the session it opened
			cl := binary.BigEndian.AppendUint32(nil, 1)
			op := zkwire.OpClose
			cl = binary.BigEndian.AppendUint32(cl, uint32(op))
			zkwire.WriteFrame(c, cl)
			for {
				f, err := zkwire.ReadFrame(c, 1<<20)
				if h, ok := zkwire.ParseReplyHeader(f); err != nil || ok && h.Xid == 1 {
					break
				}
			}
		}
		return resp, err
	}
	resp, err := hello(w.zxid.Last())
	if r, ok := zkwire.ParseConnectResponse(resp); err != nil || !ok || r.SessionID == 0 {
		t.Fatalf("connect with the zxid seen (0x%x): %+v, %v", w.zxid.Last(), r, err)
	}
	if resp, err := hello(1 << 60); err == nil {
		t.Fatalf("connect with a zxid ahead of the server answered: %x", resp)
	}
}

// TestAssumption_NewSessionAfterExpiry: when the server expires the
// session, the same *zk.Conn reports StateExpired and then, unasked, opens
// a new session, whose ID zkwire reads in the handshake; requests go on
// under it. The Session ends the old epoch on that ID. The new session's
// connect request carries lastZxidSeen 0, as go-zookeeper's would: zkwire
// reset its zxid at the refused handshake.
func TestAssumption_NewSessionAfterExpiry(t *testing.T) {
	w := &wire{}
	tap := zktest.NewSessionTap()
	c := zktest.Shared(t)
	conn, events, err := zk.Connect(c.Addrs(), 4*time.Second, zk.WithDialer(tap.Dialer(w.dialer)), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitState(t, events, zk.StateHasSession)
	old := conn.SessionID()
	id, passwd, ok := tap.Session()
	if !ok || id != old {
		t.Fatalf("tapped session 0x%x (%v), connection's 0x%x", id, ok, old)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := zktest.ExpireSession(ctx, c.Addrs(), id, passwd); err != nil {
		t.Fatal(err)
	}
	waitState(t, events, zk.StateExpired)
	waitState(t, events, zk.StateHasSession)
	cur := conn.SessionID()
	if cur == 0 || cur == old {
		t.Fatalf("session 0x%x after the expiry of 0x%x", cur, old)
	}
	w.mu.Lock()
	last := w.shakes[len(w.shakes)-1]
	w.mu.Unlock()
	if last.id != cur {
		t.Fatalf("zkwire read session 0x%x in the last handshake; the connection has 0x%x", last.id, cur)
	}
	rc := w.last()
	rc.mu.Lock()
	hello := rc.writes[0]
	rc.mu.Unlock()
	if z := binary.BigEndian.Uint64(hello[8:16]); z != 0 {
		t.Fatalf("the new session's connect request carries lastZxidSeen 0x%x, want 0 after the expiry", z)
	}
	if _, _, err := conn.Exists(c.Chroot()); err != nil {
		t.Fatalf("a request under the new session: %v", err)
	}
}
