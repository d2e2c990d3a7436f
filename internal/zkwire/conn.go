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
	// the send time of the connect request (unix ns). It returns the
	// longest that replies are held for go-zookeeper's set-watches request
	// when one is due (0: not at all); see Conn.
	Handshake(sessionID int64, timeout time.Duration, sentAt int64) (hold time.Duration)
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
//   - sends a create whose path is registered in its Creates as create2
//     (the same body; the reply adds the node's Stat) and records the
//     reply's path and Stat (docs/design.md#the-create2-token);
//   - after a handshake, when its Watches say go-zookeeper holds watches
//     (so it will write set-watches), holds every reply that would make
//     go-zookeeper write Conn.lastZxid until set-watches is written, or the
//     Observer's hold passes, which dodges a data race of go-zookeeper
//     v1.0.4 on Conn.lastZxid
//     (docs/design.md#the-read-gate-after-a-reconnect);
//   - buffers reads: go-zookeeper reads every frame in two reads (length,
//     then body), which would be two system calls per reply or event; from
//     the buffer it is at most one, and a burst of frames (an event and the
//     reply behind it) is one. Bytes are handed out, and scanned, in order
//     and only through the gate, as without the buffer.
//
// It relies on go-zookeeper writing one whole packet per Write and reading
// from one goroutine at a time (docs/design.md#assumptions-about-go-zookeeper).
type Conn struct {
	net.Conn
	obs     Observer
	creates *Creates
	watches *Watches

	mu          sync.Mutex
	wroteHello  bool
	helloSentAt int64
	sent        map[int32][]int64 // xid -> send times, oldest first
	create2     map[int32]*Create
	watchReqs   map[int32]watchRequest // xid -> a request sent with the watch flag
	wbuf        []byte                 // a rewritten create

	gate     chan struct{} // closed when replies may be read after the handshake
	gateOnce sync.Once

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
	hdr      [20]byte // frame header being assembled
	nhdr     int
	skip     int // body bytes left to skip in the current frame
	// What the current frame is, if it matters once read whole: the reply
	// to a create sent as create2, a watch event, the reply to a request
	// sent with the watch flag.
	capture  *Create
	event    bool
	watchReq *watchRequest
	keep     int    // body bytes still to capture
	body     []byte // body captured (after the xid)
}

// NewConn wraps c. creates may be nil (no create is rewritten). watches is
// shared by every connection of one *zk.Conn; nil means unknown: replies
// are then held after every handshake for which the Observer returns a
// hold, until set-watches is written or that hold passes.
func NewConn(c net.Conn, obs Observer, creates *Creates, watches *Watches) *Conn {
	return &Conn{Conn: c, obs: obs, creates: creates, watches: watches, sent: make(map[int32][]int64),
		create2: make(map[int32]*Create), watchReqs: make(map[int32]watchRequest), gate: make(chan struct{}),
		br: bufio.NewReaderSize(c, readBuffer)}
}

// Write notes the send time of the request in p, rewrites a registered
// create into create2, and opens the read gate on set-watches.
func (c *Conn) Write(p []byte) (int, error) {
	now := time.Now().UnixNano()
	var cr *Create
	c.mu.Lock()
	if !c.wroteHello {
		c.wroteHello = true
		c.helloSentAt = now
	} else if len(p) >= 8 {
		xid := int32(binary.BigEndian.Uint32(p[4:8]))
		c.sent[xid] = append(c.sent[xid], now)
		if c.watches != nil {
			if op, path, ok := WatchRequest(p); ok {
				c.watchReqs[xid] = watchRequest{op, path}
			}
		}
		if cr = c.createFor(p); cr != nil {
			c.create2[xid] = cr
			c.wbuf = append(c.wbuf[:0], p...)
			binary.BigEndian.PutUint32(c.wbuf[8:12], uint32(OpCreate2))
			p = c.wbuf
		}
	}
	c.mu.Unlock()
	if _, op, ok := Request(p); ok && op == OpSetWatches {
		c.openGate()
	}
	if cr != nil {
		// Before the write: a request queued from now on is written after
		// this one (go-zookeeper's send goroutine, which is here, is the
		// only writer and takes requests in order).
		c.creates.written(cr)
	}
	return c.Conn.Write(p)
}

func (c *Conn) createFor(p []byte) *Create {
	if c.creates == nil {
		return nil
	}
	path, ok := CreatePath(p)
	if !ok {
		return nil
	}
	return c.creates.lookup(path)
}

// Read passes replies through, parsing their frames; after the handshake,
// at the start of a frame, it first waits for the read gate if that frame
// must be held (awaitGate).
func (c *Conn) Read(p []byte) (int, error) {
	if c.r.gotHello && c.r.nhdr == 0 && c.r.skip == 0 {
		c.awaitGate()
	}
	if err := c.checkHello(); err != nil {
		c.obs.FailedBeforeHandshake(err)
		return 0, err
	}
	n, err := c.br.Read(p)
	c.scan(p[:n])
	if err != nil && !c.r.gotHello {
		c.obs.FailedBeforeHandshake(err)
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

// Close opens the read gate and closes the connection.
func (c *Conn) Close() error {
	c.openGate()
	return c.Conn.Close()
}

func (c *Conn) openGate() { c.gateOnce.Do(func() { close(c.gate) }) }

// awaitGate waits for the read gate, while it is closed, if the next frame
// is one whose processing writes go-zookeeper's Conn.lastZxid: a reply
// (xid 0 or more) with a zxid above 0 (recvLoop, conn.go lines 848-849).
// Other frames pass: watch events (xid -1), ping replies (-2), and replies
// that carry no zxid, such as those to credentials re-sent before
// set-watches (resendZkAuth waits for them, and go-zookeeper writes
// set-watches only after). It peeks at the frame's header (length, xid,
// zxid); a read error is left for Read to return.
func (c *Conn) awaitGate() {
	select {
	case <-c.gate:
		return
	default:
	}
	h, err := c.br.Peek(16) // length, xid, zxid
	if err != nil {
		return
	}
	xid := int32(binary.BigEndian.Uint32(h[4:8]))
	zxid := int64(binary.BigEndian.Uint64(h[8:16]))
	if xid >= 0 && zxid > 0 {
		<-c.gate
	}
}

// scan walks the frames in b: [len uint32][payload of len bytes]. The first
// frame is the connect response; later ones start with xid, zxid, err.
func (c *Conn) scan(b []byte) {
	for len(b) > 0 {
		if c.r.skip > 0 {
			b = c.skipBody(b)
			continue
		}
		need := 8 // length + xid
		if !c.r.gotHello {
			need = 20 // length + protocol version + timeout + session id
		}
		k := copy(c.r.hdr[c.r.nhdr:need], b)
		c.r.nhdr += k
		b = b[k:]
		if c.r.nhdr < need {
			return
		}
		length := int(binary.BigEndian.Uint32(c.r.hdr[0:4]))
		c.r.nhdr = 0
		c.r.skip = max(length-(need-4), 0)
		if !c.r.gotHello {
			c.handshake()
		} else {
			c.reply(int32(binary.BigEndian.Uint32(c.r.hdr[4:8])))
		}
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

// frameRead handles the end of a reply or event frame, read whole: from
// here go-zookeeper processes it.
func (c *Conn) frameRead() {
	switch {
	case c.r.capture != nil:
		c.creates.replied(c.r.capture, c.r.body)
	case c.r.event:
		c.watches.fired(c.r.body)
	case c.r.watchReq != nil:
		if len(c.r.body) == 12 { // zxid, err
			c.watches.replied(*c.r.watchReq, int32(binary.BigEndian.Uint32(c.r.body[8:12])))
		}
	}
	c.r.capture, c.r.event, c.r.watchReq, c.r.keep, c.r.body = nil, false, nil, 0, c.r.body[:0]
}

// handshake handles the connect response header in c.r.hdr.
func (c *Conn) handshake() {
	c.r.gotHello = true
	resp, _ := ParseConnectResponse(c.r.hdr[4:20])
	c.mu.Lock()
	sentAt := c.helloSentAt
	c.mu.Unlock()
	hold := c.obs.Handshake(resp.SessionID, resp.Timeout, sentAt)
	if c.watches != nil {
		if resp.SessionID == 0 {
			c.watches.reset() // go-zookeeper's invalidateWatches
		}
		if c.watches.Len() == 0 {
			hold = 0 // no set-watches will be written
		}
	}
	if hold > 0 {
		time.AfterFunc(hold, c.openGate)
	} else {
		c.openGate()
	}
}

// reply handles the header of a reply to xid (or of a watch event).
func (c *Conn) reply(xid int32) {
	if xid == XidWatchEvent { // not a reply
		if c.watches != nil {
			c.r.event, c.r.keep = true, c.r.skip
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
	if cr := c.create2[xid]; cr != nil {
		delete(c.create2, xid)
		c.r.capture, c.r.keep = cr, c.r.skip
	} else if wr, ok := c.watchReqs[xid]; ok {
		c.r.watchReq, c.r.keep = &wr, min(c.r.skip, 12) // zxid, err
	}
	delete(c.watchReqs, xid)
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
