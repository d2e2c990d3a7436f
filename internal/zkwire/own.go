package zkwire

import (
	"encoding/binary"
	"errors"
	"io"
	"time"

	"github.com/go-zookeeper/zk"
)

// A Conn's own requests: requests go-zookeeper does not know (addWatch,
// and reads whose replies must be seen in the order of the watch events
// around them), written by Send between go-zookeeper's packets and read
// back by the Conn itself, never handed up. Their xids are at or below
// OwnXidMax: go-zookeeper's are positive, the server's own -1 (watch
// event) and -2 (ping), go-zookeeper's -4 (auth) and -8 (set-watches).
// (docs/zookeeper-client.md#requests-of-our-own)

// OwnXidMax is the largest xid of a Conn's own requests.
const OwnXidMax int32 = -1 << 16

// Opcodes of requests go-zookeeper never sends.
const (
	OpRemoveWatches int32 = 18
	OpAddWatch      int32 = 106
)

// The modes of addWatch, and the watcher types of removeWatches.
const (
	AddWatchPersistent          int32 = 0
	AddWatchPersistentRecursive int32 = 1
	WatcherAny                  int32 = 3
	WatcherPersistent           int32 = 4
	WatcherPersistentRecursive  int32 = 5
)

// Stream receives what a Conn reads besides go-zookeeper's replies: the
// replies to its own requests, the watch events (which are also handed up
// to go-zookeeper) and the connection's end, on the reading goroutine, in
// the order read. An Observer that is a Stream gets them. Its methods must
// not block.
type Stream interface {
	// OwnReply reports the reply to a request written with Send: its
	// header and the body after it (valid during the call only).
	OwnReply(h ReplyHeader, body []byte)
	// Event reports a watch event.
	Event(e Event)
	// Closed reports, once, that the connection ended: no reply to a
	// request still unanswered will be read.
	Closed()
}

// Event is a watch notification: the zxid of its header (-1 from servers
// before 3.9, which do not send it), its type and keeper state, and the
// node's path as the server names it (with the chroot).
type Event struct {
	Zxid        int64
	Type, State int32
	Path        string
}

// ErrNotReady is Send's error before the connection's handshake was read,
// or after it ended.
var ErrNotReady = errors.New("zkwire: the connection is not ready for requests")

// Send writes b, one or more request frames (each with its 4-byte length;
// their xids at or below OwnXidMax), whole, in one write, between
// go-zookeeper's packets. The replies reach the Observer's Stream, unless
// the connection ends first (Closed).
func (c *Conn) Send(b []byte) error {
	var xbuf [4]int32
	xids := xbuf[:0]
	for f := b; len(f) > 0; {
		xid, _, ok := Request(f)
		if !ok || xid > OwnXidMax || 4+int(binary.BigEndian.Uint32(f[0:4])) > len(f) {
			return errors.New("zkwire: Send of a frame that is no own request")
		}
		xids, f = append(xids, xid), f[4+int(binary.BigEndian.Uint32(f[0:4])):]
	}
	c.mu.Lock()
	if !c.ready || c.ended {
		c.mu.Unlock()
		return ErrNotReady
	}
	now := time.Now().UnixNano()
	for _, xid := range xids {
		c.sent[xid] = append(c.sent[xid], now)
	}
	c.mu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.Conn.Write(b)
	return err
}

// Close closes the connection and reports its end to the Stream.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.end()
	return err
}

// end reports the connection's end to the Stream, once.
func (c *Conn) end() {
	c.mu.Lock()
	done := c.ended
	c.ended = true
	c.mu.Unlock()
	if !done && c.stream != nil {
		c.stream.Closed()
	}
}

// readOwn reads, at a frame boundary, the frames that answer own requests,
// so that go-zookeeper never sees them.
func (c *Conn) readOwn() error {
	for {
		// Even with no own request unanswered: one sent while this Read
		// waits may be answered next.
		h, err := c.br.Peek(8)
		if err != nil {
			return err
		}
		if int32(binary.BigEndian.Uint32(h[4:8])) > OwnXidMax {
			return nil
		}
		n := int(binary.BigEndian.Uint32(h[0:4]))
		var body []byte
		if n+4 <= c.br.Size() {
			b, err := c.br.Peek(4 + n)
			if err != nil {
				return err
			}
			body = b[4:]
		} else {
			body = make([]byte, 4+n)
			if _, err := io.ReadFull(c.br, body); err != nil {
				return err
			}
			body = body[4:]
		}
		c.ownReply(body)
		if n+4 <= c.br.Size() {
			c.br.Discard(4 + n)
		}
	}
}

// ownReply handles the reply body b to an own request.
func (c *Conn) ownReply(b []byte) {
	h, ok := ParseReplyHeader(b)
	if !ok {
		return
	}
	if h.Zxid > 0 {
		c.zxid.last.Store(h.Zxid)
	}
	c.mu.Lock()
	var sentAt int64
	if q := c.sent[h.Xid]; len(q) > 0 {
		sentAt = q[0]
		if len(q) == 1 {
			delete(c.sent, h.Xid)
		} else {
			c.sent[h.Xid] = q[1:]
		}
	}
	c.mu.Unlock()
	if sentAt != 0 {
		c.obs.Replied(sentAt)
	}
	if c.stream != nil {
		c.stream.OwnReply(h, b[ReplyHeaderLen:])
	}
}

// event decodes a watch event's body after the xid (zxid, err, type,
// state, path) and reports it to the Stream.
func (c *Conn) event(b []byte) {
	if len(b) < 24 {
		return
	}
	e := Event{Zxid: int64(binary.BigEndian.Uint64(b[0:8])),
		Type: int32(binary.BigEndian.Uint32(b[12:16])), State: int32(binary.BigEndian.Uint32(b[16:20]))}
	n := int(int32(binary.BigEndian.Uint32(b[20:24])))
	if n < 0 || 24+n > len(b) {
		return
	}
	e.Path = string(b[24 : 24+n])
	c.stream.Event(e)
}

// clamp returns p cut so that one Read never crosses the end of the frame
// being read (nor, at a frame boundary, its first header field): a reply
// to an own request is then always met at a boundary, by readOwn.
func (c *Conn) clamp(p []byte) []byte {
	if !c.r.gotHello {
		return p
	}
	limit := c.r.skip
	if limit == 0 {
		limit = c.headerLen() - c.r.nhdr
	}
	if limit > 0 && len(p) > limit {
		return p[:limit]
	}
	return p
}

// OwnRequest encodes the frame of an own request: length, xid, op, path,
// then tail (getData, getChildren2, exists: the watch flag, one byte;
// delete: the version; addWatch: the mode; removeWatches: the watcher
// type, 4 bytes each).
func OwnRequest(xid, op int32, path string, tail ...byte) []byte {
	return AppendOwnRequest(make([]byte, 0, 4+RequestHeaderLen+4+len(path)+len(tail)), xid, op, path, tail...)
}

// AppendOwnRequest appends OwnRequest's frame to b.
func AppendOwnRequest(b []byte, xid, op int32, path string, tail ...byte) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(xid))
	b = binary.BigEndian.AppendUint32(b, uint32(op))
	b = binary.BigEndian.AppendUint32(b, uint32(len(path)))
	b = append(b, path...)
	b = append(b, tail...)
	binary.BigEndian.PutUint32(b[start:start+4], uint32(len(b)-start-4))
	return b
}

// SetWatchesBodies encodes the bodies of set-watches requests (after the
// opcode: the zxid the client last saw, then the paths of its data, exist
// and child watches), each under maxBody bytes unless one path alone is
// longer, so that none nears a server's packet limit.
func SetWatchesBodies(zxid int64, data, exist, child []string, maxBody int) [][]byte {
	var out [][]byte
	lists := [3][]string{data, exist, child}
	for any3(lists) {
		var part [3][]string
		n := 8 + 3*4
		for k := range lists {
			for len(lists[k]) > 0 && (n+4+len(lists[k][0]) <= maxBody || n == 20) {
				part[k] = append(part[k], lists[k][0])
				n += 4 + len(lists[k][0])
				lists[k] = lists[k][1:]
			}
		}
		b := binary.BigEndian.AppendUint64(make([]byte, 0, n), uint64(zxid))
		for _, l := range part {
			b = binary.BigEndian.AppendUint32(b, uint32(len(l)))
			for _, p := range l {
				b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
				b = append(b, p...)
			}
		}
		out = append(out, b)
	}
	return out
}

func any3(l [3][]string) bool { return len(l[0])+len(l[1])+len(l[2]) > 0 }

// CreateTail encodes what follows the path in a create request: data (nil
// as no data, as go-zookeeper sends it), the ACL and the flags.
func CreateTail(data []byte, acl []zk.ACL, flags int32) []byte {
	n := 4 + len(data) + 4 + 4
	for _, a := range acl {
		n += 12 + len(a.Scheme) + len(a.ID)
	}
	size := uint32(len(data))
	if data == nil {
		size = 0xffffffff
	}
	b := binary.BigEndian.AppendUint32(make([]byte, 0, n), size)
	b = append(b, data...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(acl)))
	for _, a := range acl {
		b = binary.BigEndian.AppendUint32(b, uint32(a.Perms))
		b = binary.BigEndian.AppendUint32(b, uint32(len(a.Scheme)))
		b = append(b, a.Scheme...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(a.ID)))
		b = append(b, a.ID...)
	}
	return binary.BigEndian.AppendUint32(b, uint32(flags))
}

// ParseCreate2 decodes a create2 reply body (after the header): the
// node's path and Stat.
func ParseCreate2(b []byte) (path string, st zk.Stat, ok bool) {
	if len(b) < 4 {
		return "", st, false
	}
	n := int(int32(binary.BigEndian.Uint32(b[0:4])))
	if n < 0 || 4+n+StatLen > len(b) {
		return "", st, false
	}
	return string(b[4 : 4+n]), DecodeStat(b[4+n:]), true
}

// OwnFrame encodes the frame of an own request whose body (after the
// opcode) is body.
func OwnFrame(xid, op int32, body []byte) []byte {
	return AppendOwnFrame(make([]byte, 0, 4+RequestHeaderLen+len(body)), xid, op, body)
}

// AppendOwnFrame appends OwnFrame's frame to b.
func AppendOwnFrame(b []byte, xid, op int32, body []byte) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(xid))
	b = binary.BigEndian.AppendUint32(b, uint32(op))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[start:start+4], uint32(len(b)-start-4))
	return b
}

// Int32 is v encoded, for OwnRequest's tail.
func Int32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

// Bool is v encoded, for OwnRequest's tail.
func Bool(v bool) []byte {
	if v {
		return []byte{1}
	}
	return []byte{0}
}

// ParseGetData decodes a getData reply body (after the header): the data
// (nil for a node without) and the Stat.
func ParseGetData(b []byte) (data []byte, st zk.Stat, ok bool) {
	if len(b) < 4 {
		return nil, st, false
	}
	n := int(int32(binary.BigEndian.Uint32(b[0:4])))
	b = b[4:]
	if n > 0 {
		if n > len(b) {
			return nil, st, false
		}
		data, b = append([]byte(nil), b[:n]...), b[n:]
	}
	if len(b) < StatLen {
		return nil, st, false
	}
	return data, DecodeStat(b), true
}

// ParseChildren2 decodes a getChildren2 reply body (after the header): the
// children's names and the parent's Stat. The names are substrings of one
// copy of the body (two allocations for the listing): a name kept keeps
// the listing's bytes.
func ParseChildren2(b []byte) (children []string, st zk.Stat, ok bool) {
	if len(b) < 4 {
		return nil, st, false
	}
	k := int(int32(binary.BigEndian.Uint32(b[0:4])))
	if k < 0 || k > (len(b)-4)/4 {
		return nil, st, false
	}
	// Check the lengths first, then copy the names' part of the body once.
	end := 4
	for range k {
		if len(b)-end < 4 {
			return nil, st, false
		}
		n := int(int32(binary.BigEndian.Uint32(b[end:])))
		if n < 0 || n > len(b)-end-4 {
			return nil, st, false
		}
		end += 4 + n
	}
	if len(b)-end < StatLen {
		return nil, st, false
	}
	s := string(b[4:end])
	children = make([]string, k)
	for i, off := 0, 0; i < k; i++ {
		n := int(binary.BigEndian.Uint32(b[4+off:]))
		children[i] = s[off+4 : off+4+n]
		off += 4 + n
	}
	return children, DecodeStat(b[end:]), true
}
