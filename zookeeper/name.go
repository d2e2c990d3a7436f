package zookeeper

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/zkname"
)

// Node-name grammar of every queue znode this module creates:
//
//	_c_<guid>-<kind><sequence>
//	_c_<guid>-<kind>@<anchor>@<sequence>   (an anchored node)
//
// <guid> is 32 lowercase hex digits, fresh for every Acquire call (Curator's
// "protected" names, so a create whose reply was lost can be found again).
// <kind> is the recipe's node kind ("lock-", "read-", "write-", ...) and may
// itself contain digits and dashes. <sequence> is the suffix ZooKeeper appends
// to a sequential znode: the parent's counter formatted as %010d, a signed
// 32-bit number that wraps from 2147483647 to -2147483648 (then
// "-2147483648"). A name parses only if the suffix is exactly the canonical
// %010d form of an int32, so a kind that ends in digits is never confused
// with the sequence.
//
// An anchored node takes the queue position of an earlier node (its anchor,
// named by that node's sequence in the same form) instead of its own: it
// sorts right after the anchor and before every node created after the
// anchor. The read-write lock uses it for a downgrade (case C13): the read
// node a write holder creates keeps the writer's place in the queue. The
// engine creates an anchored node only in a transaction that checks the
// anchor still exists, so the place it takes was never given to anyone else.
const (
	protectedPrefix = zkname.ProtectedPrefix
	guidLen         = zkname.GUIDLen
)

// NodeName is a parsed queue znode name: _c_<guid>-<kind><sequence>, or
// _c_<guid>-<kind>@<anchor>@<sequence> for an anchored node, which takes the
// queue place of the node whose sequence is its anchor (a read-write lock's
// downgrade). The sequences are ZooKeeper's %010d suffixes, signed 32-bit.
type NodeName struct {
	Name string // the full child name
	GUID string // 32 hex digits
	Kind string // one of the queue's kinds
	Seq  int32  // the sequence number ZooKeeper assigned
	// Anchored reports whether the node takes the queue position of the
	// node whose sequence is Anchor.
	Anchored bool
	Anchor   int32

	czxid int64 // creation zxid: read only at the sequence limit (limit.go), 0 when unknown
}

// pos returns the sequence that gives the node its queue position: Anchor
// for an anchored node, Seq otherwise.
func (n NodeName) pos() int32 {
	if n.Anchored {
		return n.Anchor
	}
	return n.Seq
}

// newGUID returns 32 random lowercase hex digits.
func newGUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("recipe: crypto/rand failed: %v", err)) // never happens on Linux
	}
	return hex.EncodeToString(b[:])
}

// nodePrefix is the name given to Create for an ephemeral sequential znode;
// ZooKeeper appends the sequence. An anchored node (anchored true) carries
// its anchor's sequence.
func nodePrefix(guid, kind string, anchored bool, anchor int32) string {
	if anchored {
		return protectedPrefix + guid + "-" + kind + "@" + formatSeq(anchor) + "@"
	}
	return protectedPrefix + guid + "-" + kind
}

// parseNodeName parses a child name of a queue directory in the grammar
// above, accepting only the given kinds. It reports false for anything
// else: foreign children are ignored by every recipe, never fatal.
func parseNodeName(name string, kinds []string) (NodeName, bool) {
	n, ok := zkname.Parse(name, kinds)
	if !ok {
		return NodeName{}, false
	}
	return NodeName{Name: name, GUID: n.GUID, Kind: n.Kind, Seq: n.Seq, Anchored: n.Anchored, Anchor: n.Anchor}, true
}

// parseListing parses and orders a children listing, dropping names outside
// the grammar, and reports in the same pass the kind of the first child that
// is in the grammar but of none of kinds: a node another recipe created in
// the same directory (found true).
func parseListing(children []string, kinds []string) (nodes []NodeName, other string, found bool) {
	nodes = make([]NodeName, 0, len(children))
	for _, c := range children {
		if n, ok := parseNodeName(c, kinds); ok {
			nodes = append(nodes, n)
			continue
		}
		if !found {
			other = grammarKind(c)
			found = other != ""
		}
	}
	sortNodes(nodes)
	return nodes, other, found
}

// grammarKind returns the kind of name when name is in the grammar above
// for some kind, and "" when it is in it for none (zkname.Kind):
// parseListing spots another recipe's nodes with it.
func grammarKind(name string) string { return zkname.Kind(name) }

// reservedSegment returns why path p is reserved ("" if it is not):
// zkname.Reserved.
func reservedSegment(p string) string { return zkname.Reserved(p) }

// fixedNames are the names, outside the node-name grammar, that a recipe
// writes in its directory beside its queue nodes (zkname.FixedNames).
var fixedNames = zkname.FixedNames

// kindOf returns what stands in the kind's place of a name in the grammar,
// or "" when the name does not have that shape.
func kindOf(name string) string { return zkname.KindOf(name) }

// parseSeq accepts exactly the canonical %010d form of an int32.
func parseSeq(s string) (int32, bool) { return zkname.ParseSeq(s) }

// formatSeq formats a sequence the way ZooKeeper does (Java's %010d).
func formatSeq(v int32) string { return string(appendSeq(nil, v)) }

// appendSeq appends formatSeq(v) to b.
func appendSeq(b []byte, v int32) []byte { return zkname.AppendSeq(b, v) }

// seqLess reports whether sequence a was assigned before b, with serial-number
// arithmetic so that the order survives the counter wrapping past
// 2147483647 to negative values: a < b iff b-a, computed modulo 2^32, is a
// positive int32. It is a total order on any set of live sequences that spans
// less than 2^31 (ZooKeeper can't hold that many children under one parent).
func seqLess(a, b int32) bool { return int32(uint32(b)-uint32(a)) > 0 }

// sortNodes orders nodes in queue order: by position (pos, wrap-aware), an
// anchor before the nodes anchored to it, anchored nodes by their own
// sequence, then by name (compareNodes). A long listing is sorted by
// packed keys instead of by compareNodes: a waiter sorts its whole queue
// at every wakeup, and moving NodeName structs through a comparison sort
// cost a thousand-node listing about 280 µs (BenchmarkSortNodes).
func sortNodes(nodes []NodeName) {
	if len(nodes) <= keyedSortMin {
		slices.SortFunc(nodes, compareNodes)
		return
	}
	// key: position relative to the first node's (wrap-aware order made
	// linear: exact while the positions span less than 2^31, which the
	// wrap-aware order assumes anyway), then anchored, then the index.
	ref := nodes[0].pos()
	keys := make([]uint64, len(nodes))
	for i, n := range nodes {
		rel := uint64(uint32(n.pos()-ref) ^ 1<<31) // int32 order as uint32 order
		var anchored uint64
		if n.Anchored {
			anchored = 1
		}
		keys[i] = rel<<32 | anchored<<31 | uint64(i) // i < 2^31: a listing is far shorter
	}
	slices.Sort(keys)
	sorted := make([]NodeName, len(nodes))
	for i, k := range keys {
		sorted[i] = nodes[k&(1<<31-1)]
	}
	// Equal position and anchoredness (anchored nodes sharing an anchor):
	// the rest of compareNodes decides.
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j]>>31 == keys[i]>>31 {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(sorted[i:j], compareNodes)
		}
		i = j
	}
	copy(nodes, sorted)
}

// keyedSortMin is the listing length above which sortNodes sorts keys.
const keyedSortMin = 16

func compareNodes(x, y NodeName) int {
	if c := compareSeq(x.pos(), y.pos()); c != 0 {
		return c
	}
	if x.Anchored != y.Anchored {
		if x.Anchored {
			return 1
		}
		return -1
	}
	if c := compareSeq(x.Seq, y.Seq); c != 0 {
		return c
	}
	return strings.Compare(x.Name, y.Name)
}

func compareSeq(a, b int32) int {
	switch {
	case a == b:
		return 0
	case seqLess(a, b):
		return -1
	default:
		return 1
	}
}
