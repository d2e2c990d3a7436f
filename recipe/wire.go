package recipe

import (
	"encoding/binary"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
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
//   - the Stat of a node the engine creates, which go-zookeeper's Create does
//     not return: a create request whose path was registered (registerCreate)
//     is sent as a create2 request (opcode 15, ZooKeeper 3.5+: the same
//     request body, whose reply is the path followed by the new node's Stat),
//     and the Stat is taken off the reply. go-zookeeper decodes the path, the
//     first field, as from a create reply and ignores the rest. The Stat is
//     the server's own account of the node: its czxid (the fencing token) and
//     ephemeral owner, with no extra request. The registration's onWritten
//     runs as the create is being written: requests made after that are
//     sent after it on this connection (the listing pipelined behind a
//     create). If the write fails, they go out on the next connection,
//     possibly before the create is sent again: the listing then does not
//     show the node and is not used.
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
// once per reconnection (a Session's first connection has no watches to
// re-set, and is not held).
type trackedConn struct {
	net.Conn
	s *Session

	mu          sync.Mutex
	wroteHello  bool
	helloSentAt int64
	sent        map[int32][]int64 // xid -> send times, oldest first
	create2     map[int32]*createSlot
	wbuf        []byte // a rewritten create

	gate     chan struct{} // closed when replies may be read after the handshake
	gateOnce sync.Once

	// read side (one reader at a time)
	gotHello bool
	hdr      [20]byte // frame header being assembled
	nhdr     int
	skip     int // body bytes left to skip in the current frame
	capSlot  *createSlot
	capture  []byte // body of a create2 reply being read
}

func newTrackedConn(c net.Conn, s *Session) *trackedConn {
	tc := &trackedConn{Conn: c, s: s, sent: make(map[int32][]int64), create2: make(map[int32]*createSlot), gate: make(chan struct{})}
	s.curConn.Store(tc)
	return tc
}

func (c *trackedConn) Write(p []byte) (int, error) {
	now := time.Now().UnixNano()
	var slot *createSlot
	c.mu.Lock()
	if !c.wroteHello {
		c.wroteHello = true
		c.helloSentAt = now
	} else if len(p) >= 8 {
		xid := int32(binary.BigEndian.Uint32(p[4:8]))
		c.sent[xid] = append(c.sent[xid], now)
		if slot = c.s.createFor(p); slot != nil {
			c.create2[xid] = slot
			c.wbuf = append(c.wbuf[:0], p...)
			binary.BigEndian.PutUint32(c.wbuf[8:12], opCreate2)
			p = c.wbuf
		}
	}
	c.mu.Unlock()
	if len(p) >= 12 && int32(binary.BigEndian.Uint32(p[8:12])) == opSetWatches {
		c.openGate()
	}
	if slot != nil {
		// Before the write: a request queued from now on is written after
		// this one (go-zookeeper's send goroutine, which is here, is the only
		// writer and takes requests in order), and the caller's goroutine
		// gets going while the create is on its way.
		c.s.createWritten(slot)
	}
	return c.Conn.Write(p)
}

// ZooKeeper opcodes seen on the wire.
const (
	opCreate     = 1
	opCreate2    = 15
	opSetWatches = 101
)

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
	if err != nil && !c.gotHello {
		c.s.dials.failedBeforeHandshake(c.RemoteAddr().String(), err)
	}
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
			if c.capSlot != nil {
				c.capture = append(c.capture, b[:k]...)
			}
			c.skip -= k
			b = b[k:]
			if c.skip == 0 && c.capSlot != nil {
				c.s.createReplied(c.capSlot, c.capture)
				c.capSlot, c.capture = nil, c.capture[:0]
			}
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
			first := !c.s.started // the first connection has no watches to re-set
			if len(c.s.watches) > 0 || len(c.s.byPath) > 0 {
				wait = setWatchesWaitLong
			}
			c.s.mu.Unlock()
			if first {
				c.openGate()
			} else {
				time.AfterFunc(wait, c.openGate)
			}
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
		if slot := c.create2[xid]; slot != nil {
			delete(c.create2, xid)
			c.capSlot = slot
		}
		c.mu.Unlock()
		if sentAt != 0 {
			c.s.noteReply(sentAt)
		}
		if c.capSlot != nil && c.skip == 0 {
			c.s.createReplied(c.capSlot, nil)
			c.capSlot = nil
		}
	}
}

// createSlot is a registered create: see trackedConn.
type createSlot struct {
	onWritten func() // if set: called once, on go-zookeeper's send goroutine, as the create is written; must not block

	// under Session.c2mu
	written bool
	closed  bool    // unregistered: onWritten is not called any more
	replied bool    // a create2 reply with a Stat was read
	path    string  // the path in that reply
	stat    zk.Stat // the Stat in that reply
}

// registerCreate asks that the create request sent with exactly path (the
// sequential prefix) be sent as create2, and its reply's Stat recorded in
// slot; unregisterCreate ends that and returns what was seen.
func (s *Session) registerCreate(path string, slot *createSlot) {
	s.c2mu.Lock()
	s.c2[path] = slot
	s.c2mu.Unlock()
}

func (s *Session) unregisterCreate(path string, slot *createSlot) (written, replied bool, replyPath string, st zk.Stat) {
	s.c2mu.Lock()
	defer s.c2mu.Unlock()
	if s.c2[path] == slot {
		delete(s.c2, path)
	}
	// A create written once more after this (a late write of a request the
	// caller stopped waiting for) sends no listing nobody reads.
	slot.closed = true
	return slot.written, slot.replied, slot.path, slot.stat
}

// createFor returns the registration of the create request in packet p, if
// p is one: [len][xid][opcode 1][path: int32 length, bytes]...
func (s *Session) createFor(p []byte) *createSlot {
	if len(p) < 16 || int32(binary.BigEndian.Uint32(p[8:12])) != opCreate {
		return nil
	}
	n := int(int32(binary.BigEndian.Uint32(p[12:16])))
	if n <= 0 || 16+n > len(p) {
		return nil
	}
	s.c2mu.Lock()
	defer s.c2mu.Unlock()
	return s.c2[string(p[16:16+n])]
}

func (s *Session) createWritten(slot *createSlot) {
	s.c2mu.Lock()
	first := !slot.written && !slot.closed
	slot.written = slot.written || !slot.closed
	s.c2mu.Unlock()
	if first && slot.onWritten != nil {
		slot.onWritten()
	}
}

// createReplied parses a create2 reply body after the xid: zxid, err, then
// (if err is 0) the path and the Stat.
func (s *Session) createReplied(slot *createSlot, body []byte) {
	if len(body) < 16 || binary.BigEndian.Uint32(body[8:12]) != 0 {
		return
	}
	b := body[12:]
	n := int(int32(binary.BigEndian.Uint32(b[0:4])))
	if n < 0 || 4+n+statLen > len(b) {
		return
	}
	p := string(b[4 : 4+n])
	st := b[4+n:]
	u64 := func(i int) int64 { return int64(binary.BigEndian.Uint64(st[i : i+8])) }
	u32 := func(i int) int32 { return int32(binary.BigEndian.Uint32(st[i : i+4])) }
	stat := zk.Stat{Czxid: u64(0), Mzxid: u64(8), Ctime: u64(16), Mtime: u64(24), Version: u32(32),
		Cversion: u32(36), Aversion: u32(40), EphemeralOwner: u64(44), DataLength: u32(52),
		NumChildren: u32(56), Pzxid: u64(60)}
	s.c2mu.Lock()
	slot.replied, slot.path, slot.stat = true, p, stat
	s.c2mu.Unlock()
}

// statLen is the encoded size of a Stat.
const statLen = 68
