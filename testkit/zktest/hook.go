package zktest

import (
	"encoding/binary"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
)

// ZooKeeper request opcodes, as they appear in a request header, for
// RequestHook.
const (
	OpCreate          = zkwire.OpCreate
	OpDelete          = zkwire.OpDelete
	OpExists          = zkwire.OpExists
	OpGetData         = zkwire.OpGetData
	OpSetData         = zkwire.OpSetData
	OpSync            = zkwire.OpSync
	OpPing            = zkwire.OpPing
	OpGetChildren2    = zkwire.OpGetChildren2
	OpMulti           = zkwire.OpMulti
	OpCreate2         = zkwire.OpCreate2 // create returning the new node's Stat: how package recipe sends its queue nodes' creates
	OpCreateContainer = zkwire.OpCreateContainer
	OpSetAuth         = zkwire.OpSetAuth
	OpSetWatches      = zkwire.OpSetWatches
	OpClose           = zkwire.OpClose
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
	if first {
		return c.Conn.Write(p)
	}
	// go-zookeeper writes one request per Write; the Session's own
	// requests may come several to a Write: each is hooked, and written
	// on its own.
	total := 0
	for len(p) > 0 {
		f := p
		if len(p) >= 4 {
			if n := 4 + int(binary.BigEndian.Uint32(p[:4])); n < len(p) {
				f = p[:n]
			}
		}
		n, err := c.writeOne(f)
		total += n
		if err != nil {
			return total, err
		}
		p = p[len(f):]
	}
	return total, nil
}

// writeOne writes the request f, after its hook.
func (c *hookConn) writeOne(f []byte) (int, error) {
	_, op, ok := zkwire.Request(f)
	if !ok {
		return c.Conn.Write(f)
	}
	switch c.hook(op) {
	case DropAndCut:
		c.Conn.Close()
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed}
	case SendAndCut:
		n, err := c.Conn.Write(f)
		c.Conn.Close()
		return n, err
	}
	return c.Conn.Write(f)
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
