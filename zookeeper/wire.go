package zookeeper

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/zkwire"
)

// wireState is what the Session learns off its connections through
// zkwire.Conn. It has no lock of its own: atomics, and the hub's.
type wireState struct {
	requested time.Duration // the session timeout asked for (WithSessionTimeout)
	lastReply atomic.Int64  // unix nanos: send time of the newest request a server answered
	rtt       rttFilter     // the link's round trip (noteRTT)
	sessionID atomic.Int64  // in the last connect response
	timeout   atomic.Int64  // negotiated, in the last connect response (ns)
	cur       atomic.Pointer[zkwire.Conn]
	zxid      zkwire.Zxid // go-zookeeper's last zxid, kept by zkwire
	hub       streamHub   // the Streams (stream.go)
}

// sessionTimeout is the negotiated session timeout (the requested one
// until a server has answered).
func (w *wireState) sessionTimeout() time.Duration {
	if t := w.timeout.Load(); t > 0 {
		return time.Duration(t)
	}
	return w.requested
}

// noteRTT records a round trip of d ns.
func (w *wireState) noteRTT(d int64) { w.rtt.note(d) }

// rttFilter keeps the link's round trip: the smallest of the last
// rttSamples. A minimum, not an average: a loaded client or server (a cold
// JVM's first requests, a machine busy elsewhere) delays some replies, and
// one quick reply among them shows the link is fast; a slow link delays
// them all, and shows after rttSamples replies. Replies are read on one
// goroutine at a time.
type rttFilter struct {
	next atomic.Int64 // replies noted
	last [rttSamples]atomic.Int64
}

// rttSamples is how many replies rttFilter keeps.
const rttSamples = 8

func (f *rttFilter) note(d int64) {
	if d > 0 {
		f.last[f.next.Add(1)%rttSamples].Store(d)
	}
}

// get returns the link's round trip, 0 before any reply.
func (f *rttFilter) get() time.Duration {
	var m int64
	for i := range f.last {
		if d := f.last[i].Load(); d > 0 && (m == 0 || d < m) {
			m = d
		}
	}
	return time.Duration(m)
}

// lastReplyTime is lastReply as a time.
func (w *wireState) lastReplyTime() time.Time { return time.Unix(0, w.lastReply.Load()) }

// noteReply advances lastReply to sentAt (never backwards), and reports
// whether it moved.
func (w *wireState) noteReply(sentAt int64) bool {
	for {
		old := w.lastReply.Load()
		if sentAt <= old {
			return false
		}
		if w.lastReply.CompareAndSwap(old, sentAt) {
			return true
		}
	}
}

// dropConn closes the current connection, which makes go-zookeeper
// reconnect.
func (w *wireState) dropConn() {
	if c := w.cur.Load(); c != nil {
		c.Close()
	}
}

// track wraps a dialled connection c, making it the current one; replies
// read on it move conns' deadlines, a failure before the handshake is
// dials'.
func (w *wireState) track(c net.Conn, conns *connState, dials *dialWatch) net.Conn {
	obs := &wireObserver{w: w, conns: conns, dials: dials, c: c}
	tc := zkwire.NewConn(c, obs, &w.zxid)
	obs.tc = tc
	w.cur.Store(tc)
	return tc
}

// wireObserver is the zkwire.Observer of one connection, c.
type wireObserver struct {
	w     *wireState
	conns *connState
	dials *dialWatch
	c     net.Conn
	tc    *zkwire.Conn
}

// Handshake records the session ID and negotiated timeout, and counts the
// connect request as answered.
func (o *wireObserver) Handshake(id int64, timeout time.Duration, sentAt int64) {
	o.w.sessionID.Store(id)
	if id != 0 && timeout > 0 {
		o.w.timeout.Store(int64(timeout))
	}
	o.conns.replied(sentAt)
	o.w.hub.handshake(o.tc, id, o.w.zxid.Last())
}

// OwnReply hands the reply to a Stream's request to it.
func (o *wireObserver) OwnReply(h zkwire.ReplyHeader, body []byte) { o.w.hub.reply(h, body) }

// Event hands a watch event to the Streams.
func (o *wireObserver) Event(e zkwire.Event) { o.w.hub.event(e) }

// Closed tells the Streams that the connection ended.
func (o *wireObserver) Closed() { o.w.hub.closed(o.tc) }

// Replied advances the last server reply and the ownership deadlines.
func (o *wireObserver) Replied(sentAt int64) {
	o.conns.replied(sentAt)
	o.w.noteRTT(time.Now().UnixNano() - sentAt)
}

// FailedBeforeHandshake tells Connect's dial watch.
func (o *wireObserver) FailedBeforeHandshake(err error) {
	o.dials.failedBeforeHandshake(o.c.RemoteAddr().String(), err)
}
