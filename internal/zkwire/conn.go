package zkwire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Observer receives what a Conn reads off the wire. Its methods are called
// on go-zookeeper's receive goroutine and must not block.
type Observer interface {
	// Handshake reports the server's connect response: the session ID and
	// negotiated timeout it gives (both 0 when it refused the session), and
	// the send time of the connect request (unix ns).
	Handshake(sessionID int64, timeout time.Duration, sentAt int64)
	// Replied reports that a reply to a request written at sentAt (unix ns)
	// was read.
	Replied(sentAt int64)
	// FailedBeforeHandshake reports a read error before the connect
	// response was read.
	FailedBeforeHandshake(err error)
}

// Conn is the net.Conn go-zookeeper is given. It:
//   - reports the connect response and, for every reply, the send time of
//     the request it answers (xids are echoed; watch events are not
//     replies) to its Observer: a reply proves the server heard from the
//     client at or after that time, however late it is read;
//   - writes the Session's own requests between go-zookeeper's packets
//     and reads their replies back itself (own.go);
//   - keeps the zxid in go-zookeeper's place (Zxid): it records each
//     reply's zxid and hands the reply up with zxid 0, and writes the zxid
//     into the connect and set-watches requests, so that go-zookeeper
//     v1.0.4 never writes its Conn.lastZxid after a connect, where it
//     races with its own read of it (docs/zookeeper-client.md#the-zxid-kept-by-zkwire);
//   - buffers reads: go-zookeeper reads every frame in two reads (length,
//     then body), which would be two system calls per reply or event; from
//     the buffer it is at most one, and a burst of frames (an event and the
//     reply behind it) is one. Bytes are handed out, and scanned, in order,
//     as without the buffer.
//
// It relies on go-zookeeper writing one whole packet per Write and reading
// from one goroutine at a time (docs/zookeeper-client.md#assumptions-about-go-zookeeper).
type Conn struct {
	net.Conn
	obs  Observer
	zxid *Zxid

	stream Stream // obs, if it is one

	wmu         sync.Mutex // serializes writes: go-zookeeper's and Send's
	mu          sync.Mutex
	ready       bool // the handshake was read and gave a session
	ended       bool // Closed was reported
	wroteHello  bool
	helloSentAt int64
	watchZxid   int64             // Zxid's value at this connection's handshake
	sent        map[int32][]int64 // xid -> send times, oldest first
	wbuf        []byte            // a rewritten request

	r  reader        // one reader at a time
	br *bufio.Reader // over the net.Conn; read by the reader only
}

// readBuffer is the size of a Conn's read buffer: a few typical frames. A
// larger frame (a long listing) is read past it, straight into
// go-zookeeper's buffer.
const readBuffer = 8 << 10

// reader is the read side's frame parser state.
type reader struct {
	gotHello bool
	hdr      [20]byte // frame header being assembled, as read (zxid included)
	nhdr     int
	skip     int   // body bytes left to skip in the current frame
	zxid     int64 // the current frame's zxid, if it is a reply (xid 0 or more)
	// A watch event's body (after the xid), captured for the Stream.
	keep  int    // body bytes still to capture
	body  []byte // body captured (after the xid)
	event bool   // the frame is a watch event
}

// NewConn wraps c. zxid is shared by every connection of one *zk.Conn; it
// must not be nil.
func NewConn(c net.Conn, obs Observer, zxid *Zxid) *Conn {
	st, _ := obs.(Stream)
	return &Conn{Conn: c, obs: obs, stream: st, zxid: zxid, sent: make(map[int32][]int64),
		br: bufio.NewReaderSize(c, readBuffer)}
}

// Write notes the send time of the request in p, and writes the zxid kept
// in Zxid into the connect request and set-watches (zxid.go). p itself is
// never modified.
func (c *Conn) Write(p []byte) (int, error) {
	now := time.Now().UnixNano()
	c.mu.Lock()
	if !c.wroteHello {
		c.wroteHello = true
		c.helloSentAt = now
		p = c.patch(p, helloZxidAt, c.zxid.Last())
	} else if len(p) >= 8 {
		xid := int32(binary.BigEndian.Uint32(p[4:8]))
		c.sent[xid] = append(c.sent[xid], now)
		if _, op, _ := Request(p); op == OpSetWatches {
			p = c.patch(p, setWatchesZxidAt, c.watchZxid)
		}
	}
	c.mu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.Conn.Write(p)
}

// patch returns p copied into c.wbuf with zxid written at offset at (none
// if at is -1 or p is too short). It is called under c.mu; c.wbuf is
// reused by the next Write, after this one has returned.
func (c *Conn) patch(p []byte, at int, zxid int64) []byte {
	c.wbuf = append(c.wbuf[:0], p...)
	if at >= 0 && len(p) >= at+8 {
		binary.BigEndian.PutUint64(c.wbuf[at:at+8], uint64(zxid))
	}
	return c.wbuf
}

// Read passes replies through, parsing their frames and zeroing the zxid
// of every reply (zxid.go).
func (c *Conn) Read(p []byte) (int, error) {
	if err := c.checkHello(); err != nil {
		c.obs.FailedBeforeHandshake(err)
		return 0, err
	}
	if c.r.gotHello && c.r.nhdr == 0 && c.r.skip == 0 {
		if err := c.readOwn(); err != nil {
			c.end()
			return 0, err
		}
	}
	n, err := c.br.Read(c.clamp(p))
	c.scan(p[:n])
	switch {
	case err != nil && !c.r.gotHello:
		c.obs.FailedBeforeHandshake(err)
	case err != nil:
		c.end()
	}
	return n, err
}

// maxHello bounds the length of the server's connect response (37 bytes:
// version, timeout, session ID, a 16-byte password, read-only flag), with
// room to spare.
const maxHello = 1 << 10

// ErrNotZooKeeper is Read's error when the first frame's length is no
// connect response's: another protocol answered (an HTTP server's
// "HTTP" is a length of 1.2 GB, which go-zookeeper would allocate).
var ErrNotZooKeeper = errors.New("zkwire: the server's first answer is no ZooKeeper handshake")

// checkHello refuses, before the handshake, a first frame longer than
// maxHello.
func (c *Conn) checkHello() error {
	if c.r.gotHello || c.r.nhdr > 0 || c.r.skip > 0 {
		return nil
	}
	h, err := c.br.Peek(4)
	if err != nil || binary.BigEndian.Uint32(h) <= maxHello {
		return nil // a read error is left for Read to return
	}
	return fmt.Errorf("%w (its first bytes: %q)", ErrNotZooKeeper, h)
}

// headerLen is how much of the current frame's start is its header: the
// connect response's fields before the password (20 with the length);
// length and xid (8); for a reply (xid 0 or more) with room for it, the
// zxid too (16).
func (c *Conn) headerLen() int {
	switch {
	case !c.r.gotHello:
		return 20
	case c.r.nhdr < 8:
		return 8
	case int32(binary.BigEndian.Uint32(c.r.hdr[4:8])) >= 0 && binary.BigEndian.Uint32(c.r.hdr[0:4]) >= 12:
		return replyZxidEnd
	}
	return 8
}

// scan walks the frames in b: [len uint32][payload of len bytes]. The first
// frame is the connect response; later ones start with xid, zxid, err. It
// zeroes the zxid of replies in b, as they pass.
func (c *Conn) scan(b []byte) {
	for len(b) > 0 {
		if c.r.skip > 0 {
			b = c.skipBody(b)
			continue
		}
		need := c.headerLen()
		k := copy(c.r.hdr[c.r.nhdr:need], b)
		if need == replyZxidEnd {
			clear(b[:k]) // bytes 8..16 of a reply: its zxid, kept in hdr
		}
		c.r.nhdr += k
		b = b[k:]
		if c.r.nhdr < c.headerLen() {
			continue
		}
		length := int(binary.BigEndian.Uint32(c.r.hdr[0:4]))
		c.r.skip = max(length-(c.r.nhdr-4), 0)
		if !c.r.gotHello {
			c.r.nhdr = 0
			c.handshake()
			continue
		}
		c.r.zxid = 0
		if c.r.nhdr == replyZxidEnd {
			c.r.zxid = int64(binary.BigEndian.Uint64(c.r.hdr[8:16]))
		}
		c.r.nhdr = 0
		c.reply(int32(binary.BigEndian.Uint32(c.r.hdr[4:8])))
	}
}

// skipBody consumes the current frame's body from b (capturing what the
// frame's kind needs) and returns the rest of b.
func (c *Conn) skipBody(b []byte) []byte {
	k := min(c.r.skip, len(b))
	if n := min(k, c.r.keep); n > 0 {
		c.r.body = append(c.r.body, b[:n]...)
		c.r.keep -= n
	}
	c.r.skip -= k
	if c.r.skip == 0 {
		c.frameRead()
	}
	return b[k:]
}

// frameRead handles the end of a frame after the handshake, read whole:
// from here go-zookeeper processes it, and records a reply's zxid, as
// go-zookeeper would (recvLoop, conn.go lines 848-849).
func (c *Conn) frameRead() {
	if c.r.zxid > 0 {
		c.zxid.last.Store(c.r.zxid)
	}
	if c.r.event {
		c.event(c.r.body)
	}
	c.r.zxid, c.r.event, c.r.keep, c.r.body = 0, false, 0, c.r.body[:0]
}

// handshake handles the connect response header in c.r.hdr.
func (c *Conn) handshake() {
	c.r.gotHello = true
	resp, _ := ParseConnectResponse(c.r.hdr[4:20])
	if resp.SessionID == 0 {
		c.zxid.last.Store(0) // as go-zookeeper's authenticate resets lastZxid
	}
	c.mu.Lock()
	sentAt := c.helloSentAt
	c.watchZxid = c.zxid.Last()
	c.ready = resp.SessionID != 0
	c.mu.Unlock()
	c.obs.Handshake(resp.SessionID, resp.Timeout, sentAt)
}

// reply handles the header of a reply to xid (or of a watch event).
func (c *Conn) reply(xid int32) {
	if xid == XidWatchEvent { // not a reply
		if c.stream != nil { // the body after the xid: zxid, err, event
			c.r.event, c.r.keep = true, c.r.skip
			c.r.body = c.r.body[:0]
		}
		c.endHeader()
		return
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
		c.obs.Replied(sentAt)
	}
	c.endHeader()
}

// endHeader handles a frame without a body as read whole.
func (c *Conn) endHeader() {
	if c.r.skip == 0 {
		c.frameRead()
	}
}
