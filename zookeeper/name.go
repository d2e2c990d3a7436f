package zookeeper

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/lockname"
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
	protectedPrefix = "_c_"
	guidLen         = 32
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
	if len(name) < len(protectedPrefix)+guidLen+1 || !strings.HasPrefix(name, protectedPrefix) {
		return NodeName{}, false
	}
	guid := name[len(protectedPrefix) : len(protectedPrefix)+guidLen]
	for i := 0; i < len(guid); i++ {
		c := guid[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return NodeName{}, false
		}
	}
	rest := name[len(protectedPrefix)+guidLen:]
	if rest[0] != '-' {
		return NodeName{}, false
	}
	rest = rest[1:]
	for _, kind := range kinds {
		if !strings.HasPrefix(rest, kind) {
			continue
		}
		tail := rest[len(kind):]
		if seq, ok := parseSeq(tail); ok {
			return NodeName{Name: name, GUID: guid, Kind: kind, Seq: seq}, true
		}
		if len(tail) > 0 && tail[0] == '@' {
			if i := strings.IndexByte(tail[1:], '@'); i >= 0 {
				anchor, ok1 := parseSeq(tail[1 : 1+i])
				seq, ok2 := parseSeq(tail[2+i:])
				if ok1 && ok2 {
					return NodeName{Name: name, GUID: guid, Kind: kind, Seq: seq, Anchored: true, Anchor: anchor}, true
				}
			}
		}
	}
	return NodeName{}, false
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
// for some kind (any non-empty kind without "/" or "@": a recipe's own, or
// another's, present or future), and "" when it is in it for none. It is
// the one answer to "could this child be a queue node of this module":
// parseListing spots another recipe's nodes with it, and reservedSegment
// refuses paths with it.
func grammarKind(name string) string {
	k := kindOf(name)
	if k == "" {
		return ""
	}
	if _, ok := parseNodeName(name, []string{k}); !ok {
		return ""
	}
	return k
}

// reservedSegment returns why path p is reserved ("" if it is not): a
// segment of it is in the node-name grammar (grammarKind), or is one of
// the fixed names a recipe writes in its directory (fixedNames). A recipe
// lists its directory's children and takes every name in the grammar for a
// contender, of its own kind or of another recipe's (recipe.ErrMixedRecipes);
// a directory so named, the queue directory of a lock
// "P/_c_<guid>-lock-0000000000" say, would make the lock P look held for as
// long as it exists. A directory named like a fixed name would be taken
// for that record of its parent's recipe: the lock "P/_lock-delay" makes
// P's grants fail while it has nodes, and serve a delay afterwards. Every
// other name, "_c_" prefixed or not, is ignored by every listing and
// stays usable.
func reservedSegment(p string) string {
	for _, seg := range strings.Split(p, "/") {
		if k := grammarKind(seg); k != "" {
			return fmt.Sprintf("segment %s is named like a queue node of kind %s (%s<32 hex digits>-<kind><sequence>), "+
				"which the recipes reserve: its parent's recipe would take it for a contender",
				lockname.Quote(seg), lockname.Quote(k), protectedPrefix)
		}
		if what, ok := fixedNames[seg]; ok {
			return fmt.Sprintf("segment %s is the name of %s, which the recipes reserve: its parent's recipe would take it for that record",
				lockname.Quote(seg), what)
		}
	}
	return ""
}

// fixedNames are the names, outside the node-name grammar, that a recipe
// writes in its directory beside its queue nodes, with what each is:
// reservedSegment refuses them as path segments. A recipe that writes a
// new one adds it here (FuzzReservedCoversTheGrammar checks every name the
// engine writes).
var fixedNames = map[string]string{
	MarkerName: "the lock-delay marker a lock keeps in its directory (zookeeper.MarkerName)",
}

// seqShapes are one sequence of each shape ZooKeeper may append to a
// sequential create's name: 10 digits, "-" and 9 digits, "-" and 10 digits
// below 2147483648 (which also reads as a kind ending in "-" followed by 10
// digits), and "-2147483648" (which does not). Whether a name and a
// sequence are in the grammar depends on the sequence through its shape
// only, so the four answer for all 2^32 (FuzzReservedCoversTheGrammar).
var seqShapes = []string{"0000000000", "-000000001", "-1000000000", "-2147483648"}

// kindOf returns what stands in the kind's place of a name in the grammar
// (between "_c_<guid>-" and the sequence or the first '@'), or "" when the
// name does not have that shape. parseNodeName with that kind says whether
// the whole name is in the grammar.
func kindOf(name string) string {
	head := len(protectedPrefix) + guidLen + 1
	if len(name) <= head || !strings.HasPrefix(name, protectedPrefix) || name[head-1] != '-' {
		return ""
	}
	rest := name[head:]
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		return rest[:i]
	}
	for _, n := range []int{10, 11} {
		if len(rest) > n {
			if _, ok := parseSeq(rest[len(rest)-n:]); ok {
				return rest[:len(rest)-n]
			}
		}
	}
	return ""
}

// parseSeq accepts exactly the canonical %010d form of an int32.
func parseSeq(s string) (int32, bool) {
	if len(s) != 10 && len(s) != 11 {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 32)
	var buf [11]byte
	if err != nil || string(appendSeq(buf[:0], int32(v))) != s { // no allocation
		return 0, false
	}
	return int32(v), true
}

// formatSeq formats a sequence the way ZooKeeper does (Java's %010d).
func formatSeq(v int32) string { return string(appendSeq(nil, v)) }

// appendSeq appends formatSeq(v) to b.
func appendSeq(b []byte, v int32) []byte {
	x, width := int64(v), 10
	if x < 0 {
		b = append(b, '-')
		x, width = -x, 9
	}
	var d [10]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + x%10)
		x /= 10
		if x == 0 {
			break
		}
	}
	for n := len(d) - i; n < width; n++ {
		b = append(b, '0')
	}
	return append(b, d[i:]...)
}

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
const keyedSortMin = 32

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
