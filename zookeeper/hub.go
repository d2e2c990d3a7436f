package zookeeper

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
)

// streamHub dispatches what the Session's connections read besides
// go-zookeeper's replies: the replies to its own requests (a Stream's, or
// a call's: owncall.go), watch events, a connection's start and end, in
// the order read. It keeps the watches the calls set, and sets them again
// on the next connection of the same session, as go-zookeeper does its own.
type streamHub struct {
	mu      sync.Mutex
	chroot  string
	log     *slog.Logger
	streams map[*Stream]struct{}
	xid     int32 // the last own xid used
	nextID  uint64
	pending map[int32]ownRequest
	peak    int // the most requests pending since pending was made
	holders map[watchSpec]map[*Stream]struct{}
	watches map[watchKey]struct{} // set by calls on the server, for session
	session int64
	lost    func(zk.Event) // the Session's event callback, told of watches a new session lost
}

// ownRequest is a request sent by a Stream, by a call (owncall.go), or
// (both nil) by the Session, which then is told its reply's error code.
type ownRequest struct {
	st   *Stream
	call *ownCall
	id   uint64
	op   int32
	path string // a Stream's: below the chroot; else the server's
	conn *zkwire.Conn
	then func(code int32) // if set: called on the reading goroutine; must not block
}

func (h *streamHub) init() {
	if h.streams == nil {
		h.streams, h.pending, h.holders = make(map[*Stream]struct{}), make(map[int32]ownRequest), make(map[watchSpec]map[*Stream]struct{})
		h.watches = make(map[watchKey]struct{})
	}
}

func (h *streamHub) add(st *Stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.init()
	h.streams[st] = struct{}{}
}

// remove forgets st and returns the watches it held that no other Stream
// holds.
func (h *streamHub) remove(st *Stream) []watchSpec {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.streams, st)
	var last []watchSpec
	for w, hs := range h.holders {
		if _, ok := hs[st]; !ok {
			continue
		}
		delete(hs, st)
		if len(hs) == 0 {
			delete(h.holders, w)
			last = append(last, w)
		}
	}
	return last
}

// held reports whether a Stream holds a persistent watch on path.
func (h *streamHub) held(path string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.holders[watchSpec{path, false}])+len(h.holders[watchSpec{path, true}]) > 0
}

func (h *streamHub) holdWatch(st *Stream, w watchSpec) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holders[w] == nil {
		h.holders[w] = make(map[*Stream]struct{})
	}
	h.holders[w][st] = struct{}{}
}

// watched reports whether a call set a watch on path (a server path).
func (h *streamHub) watched(path string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range []watchKind{dataWatch, childWatch, existWatch} {
		if _, ok := h.watches[watchKey{k, path}]; ok {
			return true
		}
	}
	return false
}

// sendThen sends a request of the Session's own on c (best effort), and
// calls then (if not nil) with its reply's error code.
func (h *streamHub) sendThen(c *zkwire.Conn, op int32, path string, tail []byte, then func(code int32)) {
	_, _ = h.send(c, ownRequest{op: op, path: path, then: then}, tail)
}

// send sends r (op on its path, then tail) on c with an own xid, and
// returns its ID.
func (h *streamHub) send(c *zkwire.Conn, r ownRequest, tail []byte) (uint64, error) {
	var id uint64
	err := h.sendAll(c, []outgoing{{r: r, tail: tail}}, &id)
	return id, err
}

// outgoing is a request to send: r.op on r.path, then tail; or, with
// whole, tail is all of its body after the opcode (set-watches).
type outgoing struct {
	r     ownRequest
	tail  []byte
	whole bool
}

// appendFrame appends o's frame, with xid, to b.
func (o *outgoing) appendFrame(b []byte, xid int32) []byte {
	if o.whole {
		return zkwire.AppendOwnFrame(b, xid, o.r.op, o.tail)
	}
	return zkwire.AppendOwnRequest(b, xid, o.r.op, o.r.path, o.tail...)
}

// size bounds o's frame.
func (o *outgoing) size() int { return 4 + zkwire.RequestHeaderLen + 4 + len(o.r.path) + len(o.tail) }

// sendAll sends the requests os on c in one write, each with an own xid;
// id, if set, gets the first one's ID. ErrNotConnected: none was written.
// A write that fails may have written some of them: it ends the
// connection, whose end then fails them as it does every request in
// flight (maybe applied), and sendAll returns nil.
func (h *streamHub) sendAll(c *zkwire.Conn, os []outgoing, id *uint64) error {
	if c == nil {
		return ErrNotConnected
	}
	n := 0
	for i := range os {
		n += os[i].size()
	}
	b := make([]byte, 0, n)
	var xbuf [2]int32
	xids := xbuf[:0]
	h.mu.Lock()
	h.init()
	for i := range os {
		o := &os[i]
		if h.xid > zkwire.OwnXidMax || h.xid <= -1<<31 {
			h.xid = zkwire.OwnXidMax + 1 // the first, or wrapped around
		}
		h.xid--
		h.nextID++
		r := o.r
		r.id, r.conn = h.nextID, c
		if r.st != nil {
			r.path = strings.TrimPrefix(r.path, h.chroot)
		}
		if i == 0 && id != nil {
			*id = r.id
		}
		h.pending[h.xid] = r
		xids, b = append(xids, h.xid), o.appendFrame(b, h.xid)
	}
	h.peak = max(h.peak, len(h.pending))
	h.mu.Unlock()
	err := c.Send(b)
	switch {
	case errors.Is(err, zkwire.ErrNotReady):
		// Not written. If c ended meanwhile, closed took them all (under
		// h.mu) and ends them: they must not end twice.
		h.mu.Lock()
		_, mine := h.pending[xids[0]]
		for _, xid := range xids {
			delete(h.pending, xid)
		}
		h.mu.Unlock()
		if mine {
			return ErrNotConnected
		}
	case err != nil:
		c.Close()
	}
	return nil
}

// each calls f for every Stream.
func (h *streamHub) each(f func(*Stream)) {
	h.mu.Lock()
	sts := make([]*Stream, 0, len(h.streams))
	for st := range h.streams {
		sts = append(sts, st)
	}
	h.mu.Unlock()
	for _, st := range sts {
		f(st)
	}
}

// ended reports the Session's close.
func (h *streamHub) ended() {
	h.each(func(st *Stream) { st.push(StreamItem{Kind: StreamEnded}) })
}

// handshake reports the handshake of c, which gave session id (0: the
// session expired); zxid is the last the client saw before it. In the same
// session as before, the calls' watches are set again (a connection's
// watches end with it); in another, they are gone, and each is reported
// to lost as go-zookeeper reports its own (an EventNotWatching).
func (h *streamHub) handshake(c *zkwire.Conn, id, zxid int64) {
	h.mu.Lock()
	h.init()
	var gone []string
	if id != h.session {
		h.session = id
		for k := range h.watches {
			gone = append(gone, k.path)
		}
		clear(h.watches)
	}
	h.mu.Unlock()
	for _, p := range gone {
		if h.lost != nil {
			h.lost(zk.Event{Type: zk.EventNotWatching, State: zk.StateDisconnected, Path: p, Err: zk.ErrSessionExpired})
		}
	}
	if id != 0 {
		h.connected(c, id, zxid)
	}
}

// connected sets the calls' watches again on c, and tells the Streams.
func (h *streamHub) connected(c *zkwire.Conn, id, zxid int64) {
	var data, exist, child []string
	h.mu.Lock()
	for k := range h.watches {
		switch k.kind {
		case dataWatch:
			data = append(data, k.path)
		case existWatch:
			exist = append(exist, k.path)
		case childWatch:
			child = append(child, k.path)
		}
	}
	h.mu.Unlock()
	for _, body := range zkwire.SetWatchesBodies(zxid, data, exist, child, maxSetWatches) {
		_ = h.sendAll(c, []outgoing{{r: ownRequest{op: zkwire.OpSetWatches, then: h.setWatchesDone}, tail: body, whole: true}}, nil)
	}
	h.each(func(st *Stream) { st.push(StreamItem{Kind: StreamConnected, Session: id}) })
}

// maxSetWatches bounds a set-watches request's body, as go-zookeeper's.
const maxSetWatches = 128 << 10

// setWatchesDone logs a refused set-watches, as the Session logs
// go-zookeeper's (docs/zookeeper-client.md, assumption 12).
func (h *streamHub) setWatchesDone(code int32) {
	if code != 0 && h.log != nil {
		h.log.Error("zookeeper: setting the watches again after a reconnection failed", "err", replyError(code))
	}
}

// closed reports the end of c: its unanswered requests are forgotten, and
// the calls among them fail, on a goroutine of their own: c can end under
// Session.mu (a connection dropped at an ownership deadline), and a call's
// then may take it.
func (h *streamHub) closed(c *zkwire.Conn) {
	var lost []*ownCall
	h.mu.Lock()
	for xid, r := range h.pending {
		if r.conn == c {
			delete(h.pending, xid)
			if r.call != nil {
				lost = append(lost, r.call)
			}
		}
	}
	h.mu.Unlock()
	if len(lost) > 0 {
		go func() {
			for _, call := range lost {
				call.finish(errLostConn)
			}
		}()
	}
	h.each(func(st *Stream) { st.push(StreamItem{Kind: StreamClosed}) })
}

// event reports a watch event (paths outside the chroot are left out to
// the Streams), after forgetting the calls' watches it ends.
func (h *streamHub) event(e zkwire.Event) {
	h.mu.Lock()
	for _, k := range firedKinds(zk.EventType(e.Type)) {
		delete(h.watches, watchKey{k, e.Path})
	}
	h.mu.Unlock()
	p, ok := h.below(e.Path)
	if !ok {
		return
	}
	h.each(func(st *Stream) {
		st.push(StreamItem{Kind: StreamEvent, Zxid: e.Zxid, Type: zk.EventType(e.Type), Path: p})
	})
}

// below returns server path p below the chroot.
func (h *streamHub) below(p string) (string, bool) {
	switch {
	case h.chroot == "":
		return p, true
	case p == h.chroot:
		return "/", true
	case strings.HasPrefix(p, h.chroot+"/"):
		return p[len(h.chroot):], true
	}
	return "", false
}

// reply delivers the reply to an own request to its Stream or call.
func (h *streamHub) reply(hd zkwire.ReplyHeader, body []byte) {
	h.mu.Lock()
	r, ok := h.pending[hd.Xid]
	delete(h.pending, hd.Xid)
	if len(h.pending) == 0 && h.peak > 1024 {
		// A map does not shrink: a cache's load of 10,000 nodes would
		// keep about 1 MB on the Session for good.
		h.pending, h.peak = make(map[int32]ownRequest), 0
	}
	if ok && r.call != nil {
		if k, set := r.call.watchSet(hd.Err); set {
			h.watches[watchKey{k, r.path}] = struct{}{}
		}
	}
	h.mu.Unlock()
	switch {
	case !ok:
	case r.then != nil:
		r.then(hd.Err)
	case r.call != nil:
		r.call.replied(hd, body)
	case r.st != nil:
		r.st.push(streamReply(r, hd, body))
	}
}

// streamReply is the StreamItem of the reply to r.
func streamReply(r ownRequest, hd zkwire.ReplyHeader, body []byte) StreamItem {
	if r.path == "" {
		r.path = "/"
	}
	it := StreamItem{Kind: StreamReply, ID: r.id, Zxid: hd.Zxid, Path: r.path, Err: replyError(hd.Err)}
	if it.Err == nil {
		ok := true
		switch r.op {
		case zkwire.OpGetData:
			it.Data, it.Stat, ok = zkwire.ParseGetData(body)
		case zkwire.OpGetChildren2:
			it.Names, it.Stat, ok = zkwire.ParseChildren2(body)
		case zkwire.OpExists:
			if ok = len(body) >= zkwire.StatLen; ok {
				it.Stat = zkwire.DecodeStat(body)
			}
		}
		if !ok {
			it.Err = errMalformed(r.op, body)
		}
	}
	return it
}

func errMalformed(op int32, body []byte) error {
	return fmt.Errorf("zookeeper: a malformed reply to op %d (%d bytes)", op, len(body))
}

// replyError maps a reply's error code to go-zookeeper's errors.
func replyError(code int32) error {
	switch code {
	case 0:
		return nil
	case -6:
		return ErrUnimplemented
	case -101:
		return zk.ErrNoNode
	case -102:
		return zk.ErrNoAuth
	case -103:
		return zk.ErrBadVersion
	case -110:
		return zk.ErrNodeExists
	case -111:
		return zk.ErrNotEmpty
	case -112:
		return zk.ErrSessionExpired
	case -118:
		return zk.ErrSessionMoved
	}
	return fmt.Errorf("zookeeper: server error %d", code)
}
