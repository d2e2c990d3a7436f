package zkwire_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// The harness of the TestAssumption_ tests (assume*_test.go): the real
// go-zookeeper client through zkwire.Conn, over a connection that records
// what is written, read, and handed up.

// wire records what go-zookeeper writes on each connection (beneath
// zkwire.Conn: after the create2 rewrite) and what zkwire reports.
type wire struct {
	mu       sync.Mutex
	conns    []*recConn
	shakes   []shake
	replies  int
	zxid     zkwire.Zxid
	overlaps atomic.Int32 // concurrent Read calls seen
	cutAfter atomic.Int32 // if set: close the connection after writing a request of this opcode, once
	failOp   atomic.Int32 // if set: fail the write of a request of this opcode (closing the connection), once
	// holdSetWatches: write set-watches only once a reply with a zxid was
	// read on its connection (or after 5 s).
	holdSetWatches bool
	dialHold       sync.Mutex   // held: no dial gets through
	own            *ownRecorder // if set: the Conns' Stream
	ups            []*upConn
}

// ownRecorder is the Stream of a wire's connections: what they read for
// their own requests, and the events.
type ownRecorder struct {
	mu      sync.Mutex
	replies []zkwire.ReplyHeader
	events  []zkwire.Event
	closed  int
}

func (o *ownRecorder) OwnReply(h zkwire.ReplyHeader, _ []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.replies = append(o.replies, h)
}

func (o *ownRecorder) Event(e zkwire.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

func (o *ownRecorder) Closed() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed++
}

// streamObs is a wire's Observer that is also a Stream.
type streamObs struct {
	*wire
	*ownRecorder
}

type shake struct {
	id      int64
	timeout time.Duration
}

type recConn struct {
	net.Conn
	w        *wire
	mu       sync.Mutex
	writes   [][]byte
	reading  atomic.Int32
	cut      atomic.Bool   // cutAfter chose this connection: nothing more is read
	raw, up  []byte        // bytes read off the socket; bytes handed to go-zookeeper
	zxidIn   chan struct{} // closed when a reply with a zxid was read
	zxidOnce sync.Once
}

// upConn is the zkwire.Conn go-zookeeper reads, recording what it hands up.
type upConn struct {
	*zkwire.Conn
	rc *recConn
}

func (c *upConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.rc.mu.Lock()
	c.rc.up = append(c.rc.up, p[:n]...)
	c.rc.mu.Unlock()
	return n, err
}

// frames splits a byte stream into frame bodies (after the length).
func frames(b []byte) [][]byte {
	var fs [][]byte
	for len(b) >= 4 {
		n := int(binary.BigEndian.Uint32(b))
		if len(b) < 4+n {
			break
		}
		fs = append(fs, b[4:4+n])
		b = b[4+n:]
	}
	return fs
}

// read returns the frames read on c so far, raw and as handed up.
func (c *recConn) read() (raw, up [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return frames(c.raw), frames(c.up)
}

func (c *recConn) Write(p []byte) (int, error) {
	if _, op, _ := zkwire.Request(p); op == zkwire.OpSetWatches && c.w.holdSetWatches {
		select {
		case <-c.zxidIn:
		case <-time.After(5 * time.Second):
		}
	}
	c.mu.Lock()
	first := len(c.writes) == 0 // the handshake
	_, op, ok := zkwire.Request(p)
	request := ok && !first && op != 0
	if request && c.w.failOp.CompareAndSwap(op, 0) {
		c.mu.Unlock()
		c.Conn.Close()
		return 0, errors.New("write refused by the test")
	}
	c.writes = append(c.writes, append([]byte(nil), p...))
	c.mu.Unlock()
	// A cut is marked before the write: the reply can arrive (and a Read
	// return it) before Close below runs, and a cut connection must not
	// deliver it.
	cut := request && c.w.cutAfter.CompareAndSwap(op, 0)
	if cut {
		c.cut.Store(true)
	}
	n, err := c.Conn.Write(p)
	if cut {
		c.Conn.Close()
	}
	return n, err
}

func (c *recConn) Read(p []byte) (int, error) {
	if c.reading.Add(1) > 1 {
		c.w.overlaps.Add(1)
	}
	defer c.reading.Add(-1)
	n, err := c.Conn.Read(p)
	if c.cut.Load() {
		return 0, net.ErrClosed // what arrived after the cut is lost with it
	}
	c.mu.Lock()
	c.raw = append(c.raw, p[:n]...)
	raw := frames(c.raw)
	c.mu.Unlock()
	for _, f := range raw[min(len(raw), 1):] {
		if h, ok := zkwire.ParseReplyHeader(f); ok && h.Xid >= 0 && h.Zxid > 0 {
			c.zxidOnce.Do(func() { close(c.zxidIn) })
		}
	}
	return n, err
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

func (w *wire) Handshake(id int64, timeout time.Duration, sentAt int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.shakes = append(w.shakes, shake{id, timeout})
}

func (w *wire) Replied(int64) {
	w.mu.Lock()
	w.replies++
	w.mu.Unlock()
}

func (w *wire) FailedBeforeHandshake(error) {}

// connections returns how many connections were dialed.
func (w *wire) connections() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.conns)
}

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
	w.dialHold.Lock()
	//lint:ignore SA2001 it only waits for a test holding it
	w.dialHold.Unlock()
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	rc := &recConn{Conn: c, w: w, zxidIn: make(chan struct{})}
	w.mu.Lock()
	w.conns = append(w.conns, rc)
	w.mu.Unlock()
	var obs zkwire.Observer = w
	if w.own != nil {
		obs = streamObs{w, w.own}
	}
	up := &upConn{zkwire.NewConn(rc, obs, &w.zxid), rc}
	w.mu.Lock()
	w.ups = append(w.ups, up)
	w.mu.Unlock()
	return up, nil
}

// connect opens a go-zookeeper connection through zkwire and waits for its
// session. opts are go-zookeeper's options (whose type it does not export).
func connect(t *testing.T, w *wire, opts ...func(*zk.Conn)) (*zk.Conn, <-chan zk.Event, string) {
	t.Helper()
	c := zktest.Shared(t)
	conn, events, err := zk.Connect(c.Addrs(), 4*time.Second, zk.WithDialer(w.dialer), zk.WithLogInfo(false), func(conn *zk.Conn) {
		for _, o := range opts {
			o(conn)
		}
	})
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

// logLines records go-zookeeper's log lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// find returns the first line starting with prefix.
func (l *logLines) find(prefix string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.HasPrefix(s, prefix) {
			return s, true
		}
	}
	return "", false
}

// eventually polls cond every 10 ms for up to 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 20 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
