// Package zkwire reads and rewrites the ZooKeeper wire protocol under
// go-zookeeper: the framing and opcodes (shared with package zktest), and
// Conn, the net.Conn package recipe dials through to learn what
// go-zookeeper does not expose (the negotiated session timeout and session
// ID, the send time of every answered request, the Stat of a create) and to
// keep the zxid in go-zookeeper's place (Zxid), which its own code races
// on.
//
// Everything here depends on how go-zookeeper v1.0.4 uses its connection;
// each such assumption has a test named TestAssumption_... that runs the
// real client against a real server. See
// docs/zookeeper-client.md#assumptions-about-go-zookeeper.
package zkwire

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/go-zookeeper/zk"
)

// ZooKeeper request opcodes, as they appear in a request header.
const (
	OpCreate          int32 = 1
	OpDelete          int32 = 2
	OpExists          int32 = 3
	OpGetData         int32 = 4
	OpSetData         int32 = 5
	OpSync            int32 = 9
	OpPing            int32 = 11
	OpGetChildren2    int32 = 12
	OpMulti           int32 = 14
	OpCreate2         int32 = 15 // create whose reply carries the new node's Stat
	OpCreateContainer int32 = 19
	OpSetAuth         int32 = 100
	OpSetWatches      int32 = 101
	OpClose           int32 = -11
)

// Reply xids that answer no request of the client's.
const (
	XidWatchEvent int32 = -1 // a watch notification
)

// StatLen is the encoded size of a Stat.
const StatLen = 68

// Request returns the xid and opcode of the request packet p
// ([length][xid][opcode]...); ok is false when p is too short to hold them.
func Request(p []byte) (xid, op int32, ok bool) {
	if len(p) < 12 {
		return 0, 0, false
	}
	return int32(binary.BigEndian.Uint32(p[4:8])), int32(binary.BigEndian.Uint32(p[8:12])), true
}

// ConnectResponse is the body of the server's handshake reply.
type ConnectResponse struct {
	ProtocolVersion int32
	Timeout         time.Duration // negotiated; 0 when the session is refused (expired)
	SessionID       int64         // 0 when the session is refused
	Passwd          []byte        // nil unless the body was read whole
}

// connectHeaderLen is what a connect response holds before the password:
// protocol version, timeout, session ID.
const connectHeaderLen = 16

// ParseConnectResponse decodes a connect response body (after the frame
// length): protocolVersion int32, timeOut int32 (ms), sessionId int64,
// passwd (int32 length, bytes), [readOnly bool]. ok is false when b is
// shorter than the fields before the password; Passwd is set only when the
// password is in b.
func ParseConnectResponse(b []byte) (r ConnectResponse, ok bool) {
	if len(b) < connectHeaderLen {
		return r, false
	}
	r.ProtocolVersion = int32(binary.BigEndian.Uint32(b[0:4]))
	r.Timeout = time.Duration(int32(binary.BigEndian.Uint32(b[4:8]))) * time.Millisecond
	r.SessionID = int64(binary.BigEndian.Uint64(b[8:16]))
	if len(b) >= 20 {
		n := int(int32(binary.BigEndian.Uint32(b[16:20])))
		if n > 0 && 20+n <= len(b) {
			r.Passwd = append([]byte(nil), b[20:20+n]...)
		}
	}
	return r, true
}

// ConnectRequest encodes the body of a handshake that re-attaches session
// id with passwd: protocolVersion, lastZxidSeen, timeOut (ms), sessionId,
// passwd, readOnly.
func ConnectRequest(id int64, passwd []byte, timeout time.Duration) []byte {
	b := make([]byte, 0, 64)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint64(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(timeout/time.Millisecond))
	b = binary.BigEndian.AppendUint64(b, uint64(id))
	b = binary.BigEndian.AppendUint32(b, uint32(len(passwd)))
	b = append(b, passwd...)
	return append(b, 0)
}

// ReplyHeader is the header of a reply body: xid, zxid, error code.
type ReplyHeader struct {
	Xid  int32
	Zxid int64
	Err  int32
}

// ReplyHeaderLen is the encoded size of a ReplyHeader.
const ReplyHeaderLen = 16

// ParseReplyHeader decodes the header at the start of a reply body.
func ParseReplyHeader(b []byte) (h ReplyHeader, ok bool) {
	if len(b) < ReplyHeaderLen {
		return h, false
	}
	return ReplyHeader{
		Xid:  int32(binary.BigEndian.Uint32(b[0:4])),
		Zxid: int64(binary.BigEndian.Uint64(b[4:12])),
		Err:  int32(binary.BigEndian.Uint32(b[12:16])),
	}, true
}

// DecodeStat decodes an encoded Stat (at least StatLen bytes).
func DecodeStat(b []byte) zk.Stat {
	u64 := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[i : i+8])) }
	u32 := func(i int) int32 { return int32(binary.BigEndian.Uint32(b[i : i+4])) }
	return zk.Stat{Czxid: u64(0), Mzxid: u64(8), Ctime: u64(16), Mtime: u64(24), Version: u32(32),
		Cversion: u32(36), Aversion: u32(40), EphemeralOwner: u64(44), DataLength: u32(52),
		NumChildren: u32(56), Pzxid: u64(60)}
}

// WriteFrame writes b as one frame: its 4-byte length, then b.
func WriteFrame(w io.Writer, b []byte) error {
	f := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	_, err := w.Write(append(f, b...))
	return err
}

// ReadFrame reads one frame and returns its body; a frame over max bytes
// is an error.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if int64(n) > int64(max) {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}
