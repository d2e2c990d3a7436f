package zktest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
)

// SessionTap records the ZooKeeper session ID and password that the servers
// hand a client, so that a test can expire that session on demand with
// ExpireSession. go-zookeeper keeps the password to itself; the tap reads it
// off the wire, from the connect response at the start of every connection
// the client opens. Plug it in front of any dialer:
//
//	tap := zktest.NewSessionTap()
//	zk.Connect(addrs, timeout, zk.WithDialer(tap.Dialer(p.Dial)))
//	...
//	id, passwd, _ := tap.Session()
//	zktest.ExpireSession(ctx, cl.Addrs(), id, passwd)
//
// Its methods are safe for concurrent use.
type SessionTap struct {
	mu      sync.Mutex
	id      int64
	passwd  []byte
	timeout time.Duration
}

// NewSessionTap returns a tap that has seen no session yet.
func NewSessionTap() *SessionTap { return &SessionTap{} }

// Session returns the session ID and password of the newest connect
// response the client read (a new session after an expiry replaces the old
// one), and ok = false before the first one or when the newest says the
// session expired (ID 0 or timeout 0).
func (t *SessionTap) Session() (id int64, passwd []byte, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.id == 0 || t.timeout <= 0 {
		return 0, nil, false
	}
	return t.id, append([]byte(nil), t.passwd...), true
}

// Dialer wraps base (net.DialTimeout when nil) so that the connect response
// of every connection is recorded.
func (t *SessionTap) Dialer(base zk.Dialer) zk.Dialer {
	return wrapDialer(base, func(c net.Conn) net.Conn { return &tapConn{Conn: c, tap: t} })
}

func (t *SessionTap) record(frame []byte) {
	if len(frame) < 20 { // up to the password's length
		return
	}
	r, _ := zkwire.ParseConnectResponse(frame)
	t.mu.Lock()
	t.id, t.passwd, t.timeout = r.SessionID, r.Passwd, r.Timeout
	t.mu.Unlock()
}

// tapConn copies what the client reads until the first frame (the connect
// response) is complete, and then only passes data through.
type tapConn struct {
	net.Conn
	tap  *SessionTap
	mu   sync.Mutex
	buf  []byte
	done bool
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if !c.done {
			c.buf = append(c.buf, p[:n]...)
			if len(c.buf) >= 4 {
				size := int(binary.BigEndian.Uint32(c.buf[:4]))
				if len(c.buf) >= 4+size {
					c.done = true
					c.tap.record(c.buf[4 : 4+size])
					c.buf = nil
				}
			}
		}
		c.mu.Unlock()
	}
	return n, err
}

// ErrSessionGone is wrapped by ExpireSession's error when the server
// refuses to re-attach the session: it has expired, never existed, or the
// password is wrong (ZooKeeper answers all three alike).
var ErrSessionGone = errors.New("zktest: session refused (expired, unknown, or wrong password)")

// ErrBadSession is wrapped by ExpireSession's error for input it refuses
// before contacting any server: no addresses, session ID 0 (which would ask
// for a new session), or an empty password.
var ErrBadSession = errors.New("zktest: bad session to expire")

// ExpireSession ends session id at the servers on demand, the way Curator's
// KillSession does: it opens a connection of its own to one of addrs,
// re-attaches the session with its password (the server then closes the
// client's own connection to the session), and sends closeSession. The
// session's ephemeral znodes are deleted at once, and the client learns
// that its session expired when it reconnects. Servers are tried in order
// until one answers. ctx bounds the whole exchange (5 s per server when it
// has no deadline). It returns the zxid of the closeSession transaction:
// every znode the session created has a smaller czxid, and is gone. Errors
// wrap ErrBadSession for no addresses, ID 0 or an empty password;
// ErrSessionGone when the server refuses the session (expired, unknown, or
// a wrong password: note that ZooKeeper drops the live client's connection
// to the session before it checks the password, so even a refused attempt
// makes that client SUSPENDED for a moment); otherwise they report why no
// server could do it (the session may then have been closed or not).
func ExpireSession(ctx context.Context, addrs []string, id int64, passwd []byte) (zxid int64, err error) {
	switch {
	case len(addrs) == 0:
		return 0, fmt.Errorf("%w: no server addresses", ErrBadSession)
	case id == 0:
		return 0, fmt.Errorf("%w: session ID 0", ErrBadSession)
	case len(passwd) == 0:
		return 0, fmt.Errorf("%w: empty password for session 0x%x", ErrBadSession, id)
	}
	var errs []error
	for _, a := range addrs {
		zxid, err := expireAt(ctx, a, id, passwd)
		if err == nil || errors.Is(err, ErrSessionGone) {
			return zxid, err
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return 0, fmt.Errorf("zktest: expiring session 0x%x: %w", id, errors.Join(errs...))
}

func expireAt(ctx context.Context, addr string, id int64, passwd []byte) (int64, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	req := zkwire.ConnectRequest(id, passwd, 30*time.Second)
	if err := zkwire.WriteFrame(conn, req); err != nil {
		return 0, fmt.Errorf("%s: connect: %w", addr, err)
	}
	resp, err := zkwire.ReadFrame(conn, maxFrame)
	if err != nil {
		return 0, fmt.Errorf("%s: connect: %w", addr, err)
	}
	r, ok := zkwire.ParseConnectResponse(resp)
	if !ok {
		return 0, fmt.Errorf("%s: short connect response (%d bytes)", addr, len(resp))
	}
	if r.Timeout <= 0 {
		return 0, fmt.Errorf("%s: %w (0x%x)", addr, ErrSessionGone, id)
	}
	if r.SessionID != id {
		return 0, fmt.Errorf("%s: server gave session 0x%x, not 0x%x", addr, r.SessionID, id)
	}
	// closeSession: xid, type.
	cl := binary.BigEndian.AppendUint32(nil, 1)
	op := OpClose
	cl = binary.BigEndian.AppendUint32(cl, uint32(op))
	if err := zkwire.WriteFrame(conn, cl); err != nil {
		return 0, fmt.Errorf("%s: close: %w", addr, err)
	}
	for {
		r, err := zkwire.ReadFrame(conn, maxFrame)
		if err != nil {
			return 0, fmt.Errorf("%s: close: %w", addr, err)
		}
		// Skip pings and notifications.
		if h, ok := zkwire.ParseReplyHeader(r); ok && h.Xid == 1 {
			if h.Err != 0 {
				return 0, fmt.Errorf("%s: closeSession failed with code %d", addr, h.Err)
			}
			return h.Zxid, nil
		}
	}
}

// maxFrame bounds a reply frame expireAt reads.
const maxFrame = 1 << 20
