package zktest

import (
	"encoding/binary"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// ZooKeeper request opcodes, as they appear in a request header, for
// RequestHook.
const (
	OpCreate          int32 = 1
	OpDelete          int32 = 2
	OpExists          int32 = 3
	OpGetData         int32 = 4
	OpSetData         int32 = 5
	OpSync            int32 = 9
	OpPing            int32 = 11
	OpGetChildren2    int32 = 12
	OpMulti           int32 = 14
	OpCreate2         int32 = 15 // create returning the new node's Stat: how package recipe sends its queue nodes' creates
	OpCreateContainer int32 = 19
	OpSetAuth         int32 = 100
	OpSetWatches      int32 = 101
	OpClose           int32 = -11
)

// Fault is what a RequestHook does to one request.
type Fault int

const (
	// Pass sends the request normally.
	Pass Fault = iota
	// DropAndCut closes the connection instead of sending the request: the
	// server never sees it (the "not applied" half of a connection loss).
	DropAndCut
	// SendAndCut sends the request, then closes the connection before the
	// reply can be read: the server applies it, the client never learns the
	// outcome (the "reply lost" half).
	SendAndCut
)

// RequestHook returns a dialer (go-zookeeper's zk.Dialer signature) that
// dials through base (net.DialTimeout if nil) and calls hook with the opcode
// of every request the client writes (the connect handshake excluded), before
// it is written. The hook runs on go-zookeeper's send goroutine: it may block
// briefly (e.g. to cancel a context or change the server state) to order
// events deterministically. The session survives a cut: go-zookeeper
// reconnects with the same session.
func RequestHook(base zk.Dialer, hook func(op int32) Fault) zk.Dialer {
	return wrapDialer(base, func(c net.Conn) net.Conn { return &hookConn{Conn: c, hook: hook} })
}

// wrapDialer returns a dialer that dials through base (net.DialTimeout if
// nil) and hands every connection it opens to wrap.
func wrapDialer(base zk.Dialer, wrap func(net.Conn) net.Conn) zk.Dialer {
	if base == nil {
		base = net.DialTimeout
	}
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := base(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}
}

type hookConn struct {
	net.Conn
	hook      func(op int32) Fault
	mu        sync.Mutex
	handshake bool // the connect request was written
}

func (c *hookConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	first := !c.handshake
	c.handshake = true
	c.mu.Unlock()
	if first || len(p) < 12 {
		return c.Conn.Write(p)
	}
	// Request header: length, xid, opcode. go-zookeeper writes one request
	// per Write call.
	switch c.hook(int32(binary.BigEndian.Uint32(p[8:12]))) {
	case DropAndCut:
		c.Conn.Close()
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed}
	case SendAndCut:
		n, err := c.Conn.Write(p)
		c.Conn.Close()
		return n, err
	}
	return c.Conn.Write(p)
}

// String names the fault.
func (f Fault) String() string {
	switch f {
	case Pass:
		return "pass"
	case DropAndCut:
		return "drop-and-cut"
	case SendAndCut:
		return "send-and-cut"
	}
	return "unknown"
}
