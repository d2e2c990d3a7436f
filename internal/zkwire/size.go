package zkwire

import "github.com/go-zookeeper/zk"

// Encoded sizes of requests and replies, in ZooKeeper's encoding (jute), as
// go-zookeeper writes them: a string or byte array is a 4-byte length and
// its bytes, a vector a 4-byte count and its elements; a request frame is
// the header (xid, opcode: RequestHeaderLen) and its body, after the 4-byte
// frame length.
const (
	RequestHeaderLen = 8
	MultiHeaderLen   = 9 // before each op of a multi, and closing it
)

// PathSlack bounds what any request or reply that carries one path of the
// recipes adds to that path: a create2 reply adds 88 bytes (reply header
// 16, path length 4, Stat 68), the set-watches request go-zookeeper sends
// after a reconnection 32 (header 8, zxid 8, three vector counts 12, path
// length 4), getData, getChildren and exists requests 13, a watch event 28.
// So a path within PathSlack of the limit is never in a packet over it,
// whoever reads it (listings grow with the number of children, not with
// the path).
const PathSlack = 96

// aclSize is the encoded size of an ACL vector.
func aclSize(acl []zk.ACL) int {
	n := 4
	for _, a := range acl {
		n += 4 + 4 + len(a.Scheme) + 4 + len(a.ID)
	}
	return n
}

// CreateBody is the size of a create request's body: path, data, ACL,
// flags.
func CreateBody(pathLen, dataLen int, acl []zk.ACL) int {
	return 4 + pathLen + 4 + dataLen + aclSize(acl) + 4
}

// CreateFrame is the frame size of a create (or create2) request.
func CreateFrame(pathLen, dataLen int, acl []zk.ACL) int {
	return RequestHeaderLen + CreateBody(pathLen, dataLen, acl)
}

// CheckCreateFrame is the frame size of a multi of a version check of the
// anchor (path, version) and a create, each behind its multi header, and
// the closing header.
func CheckCreateFrame(anchorLen, pathLen, dataLen int, acl []zk.ACL) int {
	return RequestHeaderLen + MultiHeaderLen + CheckBody(anchorLen) + MultiHeaderLen + CreateBody(pathLen, dataLen, acl) + MultiHeaderLen
}

// SetDataBody is the size of a setData request's body: path, data,
// version.
func SetDataBody(pathLen, dataLen int) int { return 4 + pathLen + 4 + dataLen + 4 }

// DeleteBody is the size of a delete request's body: path, version.
func DeleteBody(pathLen int) int { return 4 + pathLen + 4 }

// CheckBody is the size of a version check's body: path, version.
func CheckBody(pathLen int) int { return 4 + pathLen + 4 }

// AuthFrame is the frame size of an auth request: type, scheme, auth.
func AuthFrame(scheme string, auth []byte) int {
	return RequestHeaderLen + 4 + 4 + len(scheme) + 4 + len(auth)
}

// GetDataReply is the frame size of the reply to a getData of a node with
// dataLen bytes of data: reply header, data, Stat.
func GetDataReply(dataLen int) int { return ReplyHeaderLen + 4 + dataLen + StatLen }
