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
//
// It also closes a data race in go-zookeeper v1.0.4 (go-zookeeper/zk PR #35,
// samuel/go-zookeeper #178/#260, unfixed upstream): after a handshake,
// go-zookeeper starts its receive loop, which writes Conn.lastZxid on every
// reply, and only then reads lastZxid (with no synchronization) to build the
// set-watches request that re-registers its watches. The race detector
// reports it on reconnections with watches set, which every recipe has. So
// the first read after the handshake waits until go-zookeeper writes the
// set-watches request (which it builds after its last read of lastZxid:
// the write, and the close of the gate it makes, happen after that read)
// or, when it has no watches to re-register (then it reads nothing), until
// a short wait passes: setWatchesWait, or setWatchesWaitLong when the
// Session knows of watches it set. Replies are delayed by at most that much,
// once per connection.
type trackedConn struct {
	net.Conn
	s *Session

	mu          sync.Mutex
	wroteHello  bool
	helloSentAt int64
	sent        map[int32][]int64 // xid -> send times, oldest first

	gate     chan struct{} // closed when replies may be read after the handshake
	gateOnce sync.Once

	// read side (one reader at a time)
	gotHello bool
	hdr      [20]byte // frame header being assembled
	nhdr     int
	skip     int // body bytes left to skip in the current frame
}

func newTrackedConn(c net.Conn, s *Session) *trackedConn {
	tc := &trackedConn{Conn: c, s: s, sent: make(map[int32][]int64), gate: make(chan struct{})}
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
	if len(p) >= 12 && int32(binary.BigEndian.Uint32(p[8:12])) == opSetWatches {
		c.openGate()
	}
	return c.Conn.Write(p)
}

// opSetWatches is ZooKeeper's set-watches opcode.
const opSetWatches = 101

// setWatchesWait and setWatchesWaitLong bound how long the first read after
// a handshake waits for go-zookeeper's set-watches request (see
// trackedConn): the long wait when the Session has set watches (it must then
// come, unless they all fired meanwhile), the short one otherwise.
const (
	setWatchesWait     = 20 * time.Millisecond
	setWatchesWaitLong = 250 * time.Millisecond
)

func (c *trackedConn) openGate() { c.gateOnce.Do(func() { close(c.gate) }) }

func (c *trackedConn) Read(p []byte) (int, error) {
	if c.gotHello {
		<-c.gate
	}
	n, err := c.Conn.Read(p)
	c.scan(p[:n])
	return n, err
}

func (c *trackedConn) Close() error {
	c.openGate()
	return c.Conn.Close()
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
			wait := setWatchesWait
			c.s.mu.Lock()
			if len(c.s.watches) > 0 || len(c.s.byPath) > 0 {
				wait = setWatchesWaitLong
			}
			c.s.mu.Unlock()
			time.AfterFunc(wait, c.openGate)
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
