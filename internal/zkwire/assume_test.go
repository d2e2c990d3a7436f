package zkwire_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// These tests pin what zkwire assumes of go-zookeeper (v1.0.4): each runs
// the real client against a real server, so that a client upgrade that
// breaks an assumption fails here, by name. See
// docs/design.md#assumptions-about-go-zookeeper.

func TestMain(m *testing.M) { zktest.Main(m) }

// wire records what go-zookeeper writes on each connection (beneath
// zkwire.Conn: after the create2 rewrite) and what zkwire reports.
type wire struct {
	mu       sync.Mutex
	conns    []*recConn
	shakes   []shake
	replies  int
	creates  zkwire.Creates
	overlaps atomic.Int32 // concurrent Read calls seen
	cutAfter atomic.Int32 // if set: close the connection after writing a request of this opcode, once
}

type shake struct {
	id      int64
	timeout time.Duration
}

type recConn struct {
	net.Conn
	w       *wire
	mu      sync.Mutex
	writes  [][]byte
	reading atomic.Int32
}

func (c *recConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, append([]byte(nil), p...))
	c.mu.Unlock()
	n, err := c.Conn.Write(p)
	if _, op, ok := zkwire.Request(p); ok && len(c.writes) > 1 && op != 0 && c.w.cutAfter.CompareAndSwap(op, 0) {
		c.Conn.Close()
	}
	return n, err
}

func (c *recConn) Read(p []byte) (int, error) {
	if c.reading.Add(1) > 1 {
		c.w.overlaps.Add(1)
	}
	defer c.reading.Add(-1)
	return c.Conn.Read(p)
}

// ops returns the opcodes of the requests written on c after the handshake.
func (c *recConn) ops() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ops []int32
	for _, p := range c.writes[1:] {
		_, op, _ := zkwire.Request(p)
		ops = append(ops, op)
	}
	return ops
}

func (w *wire) Handshake(id int64, timeout time.Duration, sentAt int64) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.shakes = append(w.shakes, shake{id, timeout})
	return 0
}

func (w *wire) Replied(int64) {
	w.mu.Lock()
	w.replies++
	w.mu.Unlock()
}

func (w *wire) FailedBeforeHandshake(error) {}

func (w *wire) conn(i int) *recConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conns[i]
}

func (w *wire) last() *recConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conns[len(w.conns)-1]
}

func (w *wire) dialer(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	rc := &recConn{Conn: c, w: w}
	w.mu.Lock()
	w.conns = append(w.conns, rc)
	w.mu.Unlock()
	return zkwire.NewConn(rc, w, &w.creates), nil
}

// connect opens a go-zookeeper connection through zkwire and waits for its
// session.
func connect(t *testing.T, w *wire) (*zk.Conn, <-chan zk.Event, string) {
	t.Helper()
	c := zktest.Shared(t)
	conn, events, err := zk.Connect(c.Addrs(), 4*time.Second, zk.WithDialer(w.dialer), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	waitState(t, events, zk.StateHasSession)
	return conn, events, c.Chroot()
}

func waitState(t *testing.T, events <-chan zk.Event, st zk.State) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Type == zk.EventSession && ev.State == st {
				return
			}
		case <-deadline:
			t.Fatalf("no %v within 20 s", st)
		}
	}
}

// TestAssumption_OnePacketPerWrite: go-zookeeper writes each request, the
// handshake included, as one whole frame in one Write call. zkwire reads
// the xid and opcode of a request, and rewrites a create, from one Write.
func TestAssumption_OnePacketPerWrite(t *testing.T) {
	w := &wire{}
	conn, _, root := connect(t, w)
	dir := root + "/one-packet"
	if _, err := conn.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(dir+"/n-", make([]byte, 300), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := conn.ChildrenW(dir); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := conn.GetW(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Multi(&zk.CheckVersionRequest{Path: dir, Version: -1},
		&zk.CreateRequest{Path: dir + "/m-", Flags: zk.FlagEphemeral | zk.FlagSequence, Acl: zk.WorldACL(zk.PermAll)}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Sync(dir); err != nil {
		t.Fatal(err)
	}
	rc := w.conn(0)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.writes) < 7 {
		t.Fatalf("%d writes for the handshake and 6 requests", len(rc.writes))
	}
	for i, p := range rc.writes {
		if len(p) < 4 {
			t.Fatalf("write %d: %d bytes, not a frame", i, len(p))
		}
		if n := int(uint32(p[0])<<24 | uint32(p[1])<<16 | uint32(p[2])<<8 | uint32(p[3])); n != len(p)-4 {
			t.Fatalf("write %d: frame length %d in a write of %d bytes: not one whole packet", i, n, len(p))
		}
	}
}

// TestAssumption_HandshakeAndReplyFraming: the first frame read is the
// connect response (session ID, negotiated timeout), and every reply
// echoes its request's xid, so that each request is matched to a reply.
func TestAssumption_HandshakeAndReplyFraming(t *testing.T) {
	w := &wire{}
	conn, _, root := connect(t, w)
	const n = 20
	for range n {
		if _, _, err := conn.Exists(root); err != nil {
			t.Fatal(err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.shakes) != 1 || w.shakes[0].id != conn.SessionID() || w.shakes[0].timeout <= 0 {
		t.Fatalf("handshakes seen %+v; session 0x%x", w.shakes, conn.SessionID())
	}
	if w.replies < n {
		t.Fatalf("%d replies matched to requests, want at least %d", w.replies, n)
	}
}

// TestAssumption_OneReaderAtATime: go-zookeeper reads its connection from
// one goroutine at a time (zkwire's frame parser keeps unlocked state).
func TestAssumption_OneReaderAtATime(t *testing.T) {
	w := &wire{}
	conn, _, root := connect(t, w)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				conn.Exists(root)
			}
		})
	}
	wg.Wait()
	if n := w.overlaps.Load(); n > 0 {
		t.Fatalf("%d concurrent Read calls", n)
	}
}

// TestAssumption_Create2ReplyReadAsCreate: a create sent as create2 gets
// go-zookeeper's Create the path, as a create's reply would (it decodes the
// first field and ignores the Stat behind it), and zkwire the node's Stat.
// A request made once the create is being written is written after it.
func TestAssumption_Create2ReplyReadAsCreate(t *testing.T) {
	w := &wire{}
	conn, _, root := connect(t, w)
	dir := root + "/create2"
	if _, err := conn.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	listed := make(chan error, 1)
	cr := w.creates.Register(dir+"/n-", func() {
		go func() {
			_, _, err := conn.Children(dir)
			listed <- err
		}()
	})
	p, err := conn.Create(dir+"/n-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-listed; err != nil {
		t.Fatal(err)
	}
	written, replied, rpath, st := w.creates.Unregister(dir+"/n-", cr)
	if !written || !replied || rpath != p {
		t.Fatalf("written %v, replied %v, reply path %q; Create returned %q", written, replied, rpath, p)
	}
	_, real, err := conn.Exists(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Czxid != real.Czxid || st.EphemeralOwner != conn.SessionID() || st.Version != real.Version {
		t.Fatalf("create2 Stat %+v, node's %+v (session 0x%x)", st, *real, conn.SessionID())
	}
	ops := w.conn(0).ops()
	create, list := -1, -1
	for i, op := range ops {
		switch op {
		case zkwire.OpCreate2:
			create = i
		case zkwire.OpGetChildren2:
			list = i
		}
	}
	if create < 0 || list < create {
		t.Fatalf("opcodes written %v: want the create2, then the listing made while it was written", ops)
	}
}

// TestAssumption_SetWatchesFirstAfterReconnect: on a new connection to the
// same session, go-zookeeper's first request is set-watches when watches
// are set, written after its last read of the zxid that the receive loop
// writes. The read gate waits for that write.
func TestAssumption_SetWatchesFirstAfterReconnect(t *testing.T) {
	w := &wire{}
	conn, events, root := connect(t, w)
	if _, _, _, err := conn.GetW(root); err != nil {
		t.Fatal(err)
	}
	w.conn(0).Conn.Close()
	waitState(t, events, zk.StateDisconnected)
	waitState(t, events, zk.StateHasSession)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if ops := w.last().ops(); len(ops) > 0 {
			if ops[0] != zkwire.OpSetWatches {
				t.Fatalf("first request after the reconnection has opcode %d, want set-watches (%d)", ops[0], zkwire.OpSetWatches)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no request written after the reconnection")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestAssumption_OversizeFailsUnsent: with WithMaxConnBufferSize, a request
// whose frame is over the buffer fails with zk.ErrShortBuffer before
// anything is written, and the connection goes on (recipe sizes the buffer
// to its packet limit).
func TestAssumption_OversizeFailsUnsent(t *testing.T) {
	w := &wire{}
	c := zktest.Shared(t)
	conn, events, err := zk.Connect(c.Addrs(), 4*time.Second, zk.WithDialer(w.dialer), zk.WithLogInfo(false),
		zk.WithMaxConnBufferSize(128<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitState(t, events, zk.StateHasSession)
	before := len(w.conn(0).ops())
	if _, err := conn.Create(c.Chroot()+"/big", make([]byte, 128<<10), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrShortBuffer) {
		t.Fatalf("oversize create: %v, want zk.ErrShortBuffer", err)
	}
	for _, op := range w.conn(0).ops()[before:] {
		if op == zkwire.OpCreate || op == zkwire.OpCreate2 {
			t.Fatal("the oversize create was written")
		}
	}
	if _, _, err := conn.Exists(c.Chroot()); err != nil {
		t.Fatalf("the connection did not go on: %v", err)
	}
}

// TestAssumption_WrittenRequestNotResent: a request written on a
// connection that breaks before its reply fails with a connection error
// and is not written again on the next connection (so "lost right after
// sending" is an outcome the caller sees once per send).
func TestAssumption_WrittenRequestNotResent(t *testing.T) {
	w := &wire{}
	conn, events, root := connect(t, w)
	w.cutAfter.Store(zkwire.OpSetData)
	_, err := conn.Set(root, []byte("x"), -1)
	if err == nil || !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("setData on a cut connection: %v, want zk.ErrConnectionClosed", err)
	}
	waitState(t, events, zk.StateHasSession)
	if _, _, err := conn.Exists(root); err != nil {
		t.Fatal(err)
	}
	for _, op := range w.last().ops() {
		if op == zkwire.OpSetData {
			t.Fatal("the setData was written again on the new connection")
		}
	}
}
