package zookeeper

import (
	"fmt"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The packet limit (WithMaxPacket) is kept in two places, one mechanism:
// the recipes check every request they build against it before sending
// (NewQueue, Queue.CheckNodeData, Queue.join; zkside.Session's
// CheckRequest and CheckMulti for packages that build their own), so the
// caller gets an error that names the problem; and go-zookeeper's send
// buffer is sized to it
// (Connect), so that whatever was not checked fails alone, at encoding,
// instead of being sent for the server to drop the connection. Request
// sizes are zkwire's; TestPacketSizesMatchTheEncoding checks them against
// go-zookeeper's encoder. See docs/zookeeper-client.md#lost-sends-and-packet-limits.

// packetLimit is the Session's packet limit (WithMaxPacket) and the ACL
// its creates carry: the sizes every request is checked against.
type packetLimit struct {
	max int
	acl []zk.ACL
}

// pathSlack bounds what a request or reply adds to the one path it carries
// (zkwire.PathSlack).
const pathSlack = zkwire.PathSlack

// maxNameLen is the longest child name of the given kinds in the node-name
// grammar, sequence included; anchored names only for a queue declared
// AllowsAnchors (anchors: AcquireAnchored refuses the others).
func maxNameLen(kinds []string, anchors bool) int {
	k := 0
	for _, kind := range kinds {
		k = max(k, len(kind))
	}
	n := len(protectedPrefix) + guidLen + 1 + k + seqLen
	if anchors {
		n += 1 + seqLen + 1 // "@<anchor>@"
	}
	return n
}

// seqLen is the longest sequence suffix ZooKeeper appends ("-2147483648").
const seqLen = 11

// checkQueueDir checks that every request a queue of the given kinds
// (with anchored nodes if anchors) on the directory dir (as given) and
// adir (absolute) builds fits the packet
// limit without node data: the paths of its nodes (with pathSlack) and
// its creates. Node data is checked where it is given (CheckNodeData) or
// at the call (join). The error is a *PathError matching recipe.ErrTooLarge.
func (pl packetLimit) checkQueueDir(dir, adir string, kinds []string, anchors bool) error {
	node := len(adir) + 1 + maxNameLen(kinds, anchors)
	need := pl.queueRequestSize(adir, kinds, anchors)
	if need <= pl.max {
		return nil
	}
	reason := fmt.Sprintf("too long: its nodes' paths (%d bytes with the chroot) need %d-byte requests, over the session's packet limit of %d bytes "+
		"(the servers' jute.maxbuffer: see zookeeper.WithMaxPacket)", node, need, pl.max)
	return &PathError{Path: dir, Reason: reason, Err: recipe.ErrTooLarge}
}

// queueRequestSize bounds every request a queue of the given kinds (with
// anchored nodes if anchors) on adir sends, but for the data its creates
// carry: the paths of its nodes (with pathSlack) and its creates without
// data.
func (pl packetLimit) queueRequestSize(adir string, kinds []string, anchors bool) int {
	return max(len(adir)+1+maxNameLen(kinds, anchors)+pathSlack, pl.queueCreateFrame(adir, kinds, anchors, 0))
}

// queueCreateFrame is the largest create request of a queue of the given
// kinds on adir with dataLen bytes of data: with anchors, the anchored
// multi.
func (pl packetLimit) queueCreateFrame(adir string, kinds []string, anchors bool, dataLen int) int {
	prefix := len(adir) + 1 + maxNameLen(kinds, anchors) - seqLen // the name sent has no sequence
	if !anchors {
		return zkwire.CreateFrame(prefix, dataLen, pl.acl)
	}
	return zkwire.CheckCreateFrame(len(adir)+1+maxNameLen(kinds, anchors), prefix, dataLen, pl.acl)
}

// CheckNodeData reports whether a node of the queue may carry data: nil,
// or an error matching recipe.ErrBadOption and recipe.ErrTooLarge for data
// over MaxNodeData, or recipe.ErrTooLarge when the create of such a node
// (with the queue's path and the Session's ACL) would be over the packet
// limit. Acquire, Join and AcquireAnchored check their data so; a recipe
// calls it where data is given (mutex.WithData, a latch's id), so that
// the mistake shows there. It sends nothing.
func (q *Queue) CheckNodeData(data []byte) error {
	return q.d.checkFrame(data, q.d.s.limit.queueCreateFrame(q.d.adir, q.d.kinds, q.contract.anchors, len(data)))
}

// checkCreate checks the create request join is about to send for a node
// of kind carrying data (anchored to anchor, if set): data within
// MaxNodeData, the request within the packet limit.
func (q *qdir) checkCreate(kind string, data []byte, anchor *anchorSpec) error {
	return q.checkFrame(data, q.createSize(kind, data, anchor))
}

// createSize is the frame size of the create join sends for a node of kind
// carrying data (anchored to anchor, if set).
func (q *qdir) createSize(kind string, data []byte, anchor *anchorSpec) int {
	if anchor != nil {
		return zkwire.CheckCreateFrame(len(anchor.path), len(q.adir)+1+len(nodePrefix("", kind, true, anchor.seq))+guidLen, len(data), q.s.limit.acl)
	}
	return zkwire.CreateFrame(len(q.adir)+1+len(nodePrefix("", kind, false, 0))+guidLen, len(data), q.s.limit.acl)
}

// checkFrame checks node data against MaxNodeData, and frame, the size of
// the create that carries it, against the packet limit.
func (q *qdir) checkFrame(data []byte, frame int) error {
	if len(data) > MaxNodeData {
		return errorf("%w: %w: node data of %d bytes (at most %d)", recipe.ErrBadOption, recipe.ErrTooLarge, len(data), MaxNodeData)
	}
	if frame > q.s.limit.max {
		return fmt.Errorf("%w: the create of a node of %s with %d bytes of data would be a %d-byte request, over the session's packet limit of %d bytes "+
			"(the servers' jute.maxbuffer: see zookeeper.WithMaxPacket)", recipe.ErrTooLarge, shortpath.Of(q.dir), len(data), frame, q.s.limit.max)
	}
	return nil
}

// checkRequest is zkside.Session's CheckRequest (one op) and CheckMulti
// (multi: the ops of one Conn.Multi, each behind its 9-byte header, and
// the closing header): the frame must fit the limit, and the data of each
// create and setData must be readable back within it.
func (pl packetLimit) checkRequest(multi bool, ops []any) error {
	type write struct {
		path string
		data int
	}
	var writes []write // the node data the ops write
	frame := zkwire.RequestHeaderLen
	if multi {
		frame += zkwire.MultiHeaderLen // the closing header
	}
	what, largest := "", -1 // the op with the largest body, for the message
	for i, op := range ops {
		var body int
		var desc string
		switch o := op.(type) {
		case *zk.CreateRequest:
			body, desc = zkwire.CreateBody(len(o.Path), len(o.Data), o.Acl), fmt.Sprintf("create of %s with %d bytes of data", shortpath.Of(o.Path), len(o.Data))
			writes = append(writes, write{o.Path, len(o.Data)})
		case *zk.SetDataRequest:
			body, desc = zkwire.SetDataBody(len(o.Path), len(o.Data)), fmt.Sprintf("setData of %s with %d bytes of data", shortpath.Of(o.Path), len(o.Data))
			writes = append(writes, write{o.Path, len(o.Data)})
		case *zk.DeleteRequest:
			body, desc = zkwire.DeleteBody(len(o.Path)), "delete of "+shortpath.Of(o.Path)
		case *zk.CheckVersionRequest:
			body, desc = zkwire.CheckBody(len(o.Path)), "check of "+shortpath.Of(o.Path)
		default:
			return fmt.Errorf("%w: op %d: %T is not a create, setData, delete or check request", recipe.ErrBadOption, i, op)
		}
		if body > largest {
			largest, what = body, desc
		}
		if multi {
			frame += zkwire.MultiHeaderLen // the op's header
		}
		frame += body
	}
	if multi {
		what = fmt.Sprintf("multi of %d operations (the largest: the %s)", len(ops), what)
	}
	if frame > pl.max {
		return fmt.Errorf("%w: the %s would be a %d-byte request, over the session's packet limit of %d bytes "+
			"(the servers' jute.maxbuffer: see zookeeper.WithMaxPacket)", recipe.ErrTooLarge, what, frame, pl.max)
	}
	for _, w := range writes {
		if n := zkwire.GetDataReply(w.data); n > pl.max {
			return fmt.Errorf("%w: %d bytes of data for %s would take a %d-byte getData reply to read back, over the session's packet limit of %d bytes "+
				"(the servers' jute.maxbuffer: see zookeeper.WithMaxPacket)", recipe.ErrTooLarge, w.data, shortpath.Of(w.path), n, pl.max)
		}
	}
	return nil
}
