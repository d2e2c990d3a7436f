package zktest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
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
	// connect response: protocolVersion int32, timeOut int32, sessionId
	// int64, passwd (int32 length + bytes), [readOnly bool].
	if len(frame) < 20 {
		return
	}
	timeout := time.Duration(int32(binary.BigEndian.Uint32(frame[4:8]))) * time.Millisecond
	id := int64(binary.BigEndian.Uint64(frame[8:16]))
	n := int(int32(binary.BigEndian.Uint32(frame[16:20])))
	var pw []byte
	if n > 0 && 20+n <= len(frame) {
		pw = append([]byte(nil), frame[20:20+n]...)
	}
	t.mu.Lock()
	t.id, t.passwd, t.timeout = id, pw, timeout
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

// ErrSessionGone is wrapped by ExpireSession's error when the server says
// the session had already expired (or never existed).
var ErrSessionGone = errors.New("zktest: session already expired")

// ExpireSession ends session id at the servers on demand, the way Curator's
// KillSession does: it opens a connection of its own to one of addrs,
// re-attaches the session with its password (the server then closes the
// client's own connection to the session), and sends closeSession. The
// session's ephemeral znodes are deleted at once, and the client learns
// that its session expired when it reconnects. Servers are tried in order
// until one answers. ctx bounds the whole exchange (5 s per server when it
// has no deadline). It returns the zxid of the closeSession transaction:
// every znode the session created has a smaller czxid, and is gone. Errors
// wrap ErrSessionGone when the session no longer exists, or report why no
// server could do it (the session may then have been closed or not).
func ExpireSession(ctx context.Context, addrs []string, id int64, passwd []byte) (zxid int64, err error) {
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

	// connect request: protocolVersion, lastZxidSeen, timeOut, sessionId,
	// passwd, readOnly.
	req := make([]byte, 0, 64)
	req = binary.BigEndian.AppendUint32(req, 0)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, 30000)
	req = binary.BigEndian.AppendUint64(req, uint64(id))
	req = binary.BigEndian.AppendUint32(req, uint32(len(passwd)))
	req = append(req, passwd...)
	req = append(req, 0)
	if err := writeFrame(conn, req); err != nil {
		return 0, fmt.Errorf("%s: connect: %w", addr, err)
	}
	resp, err := readFrame(conn)
	if err != nil {
		return 0, fmt.Errorf("%s: connect: %w", addr, err)
	}
	if len(resp) < 16 {
		return 0, fmt.Errorf("%s: short connect response (%d bytes)", addr, len(resp))
	}
	if timeout := int32(binary.BigEndian.Uint32(resp[4:8])); timeout <= 0 {
		return 0, fmt.Errorf("%s: %w (0x%x)", addr, ErrSessionGone, id)
	}
	if got := int64(binary.BigEndian.Uint64(resp[8:16])); got != id {
		return 0, fmt.Errorf("%s: server gave session 0x%x, not 0x%x", addr, got, id)
	}
	// closeSession: xid, type.
	cl := binary.BigEndian.AppendUint32(nil, 1)
	op := OpClose
	cl = binary.BigEndian.AppendUint32(cl, uint32(op))
	if err := writeFrame(conn, cl); err != nil {
		return 0, fmt.Errorf("%s: close: %w", addr, err)
	}
	for {
		r, err := readFrame(conn)
		if err != nil {
			return 0, fmt.Errorf("%s: close: %w", addr, err)
		}
		// reply header: xid, zxid, err. Skip pings and notifications.
		if len(r) >= 16 && int32(binary.BigEndian.Uint32(r[:4])) == 1 {
			if code := int32(binary.BigEndian.Uint32(r[12:16])); code != 0 {
				return 0, fmt.Errorf("%s: closeSession failed with code %d", addr, code)
			}
			return int64(binary.BigEndian.Uint64(r[4:12])), nil
		}
	}
}

func writeFrame(w io.Writer, b []byte) error {
	f := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	_, err := w.Write(append(f, b...))
	return err
}

func readFrame(r io.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > 1<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

// BlackholeFor blackholes the proxy for d (see Blackhole) and then resumes
// it, or resumes it early when ctx ends. It blocks meanwhile.
func (p *FaultProxy) BlackholeFor(ctx context.Context, d time.Duration) {
	p.Blackhole()
	defer p.Resume()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
