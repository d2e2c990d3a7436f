package recipe

import (
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// trackedConn watches the ZooKeeper wire protocol in both directions to learn
// what go-zookeeper does not expose:
//   - the negotiated session timeout and the session ID, from the connect
//     response (length, protocol version, timeout ms, session id, password);
//   - the send time of the newest request the server has answered. Requests
//     carry an xid; replies echo it (pings use xid -2, watch events -1 and are
//     not replies). When a reply is read, the Session's lastReply advances
//     to the time its request was written. A reply proves the server heard
//     from us at or after that time, whatever the delay before we read it.
//
// go-zookeeper writes one whole packet per Write call, and reads from a
// single goroutine at a time, which is all the parsing below relies on.
type trackedConn struct {
	net.Conn
	s *Session

	mu          sync.Mutex
	wroteHello  bool
	helloSentAt int64
	sent        map[int32][]int64 // xid -> send times, oldest first

	// read side (one reader at a time)
	gotHello bool
	hdr      [20]byte // frame header being assembled
	nhdr     int
	skip     int // body bytes left to skip in the current frame
}

func newTrackedConn(c net.Conn, s *Session) *trackedConn {
	tc := &trackedConn{Conn: c, s: s, sent: make(map[int32][]int64)}
	s.curConn.Store(tc)
	return tc
}

func (c *trackedConn) Write(p []byte) (int, error) {
	now := time.Now().UnixNano()
	c.mu.Lock()
	if !c.wroteHello {
		c.wroteHello = true
		c.helloSentAt = now
	} else if len(p) >= 8 {
		xid := int32(binary.BigEndian.Uint32(p[4:8]))
		c.sent[xid] = append(c.sent[xid], now)
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.scan(p[:n])
	return n, err
}

// scan walks the frames in b: [len uint32][payload of len bytes]. The first
// frame is the connect response; later ones start with xid, zxid, err.
func (c *trackedConn) scan(b []byte) {
	for len(b) > 0 {
		if c.skip > 0 {
			k := min(c.skip, len(b))
			c.skip -= k
			b = b[k:]
			continue
		}
		need := 8 // length + xid
		if !c.gotHello {
			need = 20 // length + protocol version + timeout + session id
		}
		k := copy(c.hdr[c.nhdr:need], b)
		c.nhdr += k
		b = b[k:]
		if c.nhdr < need {
			return
		}
		length := int(binary.BigEndian.Uint32(c.hdr[0:4]))
		c.nhdr = 0
		c.skip = max(length-(need-4), 0)
		if !c.gotHello {
			c.gotHello = true
			timeoutMs := int32(binary.BigEndian.Uint32(c.hdr[8:12]))
			id := int64(binary.BigEndian.Uint64(c.hdr[12:20]))
			c.s.sniffID.Store(id)
			if id != 0 && timeoutMs > 0 {
				c.s.sniffTimeout.Store(int64(time.Duration(timeoutMs) * time.Millisecond))
			}
			c.mu.Lock()
			sentAt := c.helloSentAt
			c.mu.Unlock()
			c.s.noteReply(sentAt)
			continue
		}
		xid := int32(binary.BigEndian.Uint32(c.hdr[4:8]))
		if xid == -1 {
			continue // a watch event: not a reply
		}
		c.mu.Lock()
		var sentAt int64
		if q := c.sent[xid]; len(q) > 0 {
			sentAt = q[0]
			if len(q) == 1 {
				delete(c.sent, xid)
			} else {
				c.sent[xid] = q[1:]
			}
		}
		c.mu.Unlock()
		if sentAt != 0 {
			c.s.noteReply(sentAt)
		}
	}
}
