package zkwire

import "sync/atomic"

// Zxid is the zxid of the newest reply read on the connections of one
// *zk.Conn: what go-zookeeper v1.0.4 keeps in its Conn.lastZxid, kept here
// instead. Conn records it from every reply (xid 0 or more, zxid above 0,
// go-zookeeper's rule), hands the reply up with zxid 0, and sets it back to
// 0 when a handshake refuses the session (as go-zookeeper does). The zero
// value is ready to use; it is safe for concurrent use.
//
// go-zookeeper uses lastZxid for two things only, both in requests that
// Conn rewrites, and returns no reply's zxid through its API:
//   - LastZxidSeen in the connect request: a server that has not seen that
//     zxid refuses the client, which is how a client never goes back in
//     time. Conn writes Last there.
//   - RelativeZxid in set-watches, which re-registers the watches
//     go-zookeeper holds on a new connection: the server fires at once each
//     watch whose node changed after that zxid. Conn writes the value Last
//     had at this connection's handshake, before any reply on it was read:
//     the client's view is current up to there for every watch it
//     re-registers. A later value (a reply read on the new connection
//     before set-watches went out) could hide a change made in between: a
//     missed event. An earlier one only fires a watch needlessly, which
//     every wakeup tolerates (it reads again).
//
// So go-zookeeper never writes lastZxid after a connect (only resets it
// to 0, on its connection loop), and its receive loop's write cannot race
// with set-watches' read of it (docs/zookeeper-client.md#the-zxid-kept-by-zkwire).
type Zxid struct {
	last atomic.Int64
}

// Last returns the zxid of the newest reply read (0 before any, and after
// a refused session).
func (z *Zxid) Last() int64 { return z.last.Load() }

// Offsets of the zxid in the frames Conn rewrites, from the frame's start
// (its 4-byte length).
const (
	helloZxidAt      = 8  // connect request: length, protocol version, lastZxidSeen
	setWatchesZxidAt = 12 // set-watches: length, xid, opcode, relativeZxid
	replyZxidEnd     = 16 // reply: length, xid, zxid (bytes 8..16)
)
