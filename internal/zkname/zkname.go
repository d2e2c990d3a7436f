// Package zkname is the node-name grammar of the module's ZooKeeper
// recipes and the rule for their paths: package zookeeper builds its
// NodeName, its listings and its path checks on it, and the command-line
// tool reads a directory with it before any Session exists (a path given
// on the command line is checked before connecting). It knows nothing of
// sessions, queues or errors: a check returns the reason, and package
// zookeeper makes its *PathError of it.
//
// The grammar of every queue znode the recipes create:
//
//	_c_<guid>-<kind><sequence>
//	_c_<guid>-<kind>@<anchor>@<sequence>   (an anchored node)
//
// <guid> is 32 lowercase hex digits; <kind> is the recipe's node kind
// ("lock-", "read-", ...) and may itself contain digits and dashes;
// <sequence> (and <anchor>) the canonical %010d form of an int32, the
// suffix ZooKeeper appends to a sequential znode. Package zookeeper's
// name.go says more.
package zkname

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/zkrecipes/zkrecipes/internal/lockname"
)

const (
	// ProtectedPrefix starts every queue node's name.
	ProtectedPrefix = "_c_"
	// GUIDLen is the length of a name's GUID, in hex digits.
	GUIDLen = 32
	// MarkerName is the lock-delay marker a lock with a lock-delay keeps
	// in its directory beside its queue nodes: outside the grammar, and
	// reserved (FixedNames).
	MarkerName = "_lock-delay"
)

// Name is a queue node's name parsed by Parse.
type Name struct {
	GUID     string
	Kind     string
	Seq      int32
	Anchored bool  // the node takes the queue position of Anchor
	Anchor   int32 // the anchor's sequence, for an anchored node
}

// Parse parses a child name of a queue directory in the grammar,
// accepting only the given kinds. It reports false for anything else:
// foreign children are ignored by every recipe, never fatal.
func Parse(name string, kinds []string) (Name, bool) {
	if len(name) < len(ProtectedPrefix)+GUIDLen+1 || !strings.HasPrefix(name, ProtectedPrefix) {
		return Name{}, false
	}
	guid := name[len(ProtectedPrefix) : len(ProtectedPrefix)+GUIDLen]
	for i := 0; i < len(guid); i++ {
		c := guid[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return Name{}, false
		}
	}
	rest := name[len(ProtectedPrefix)+GUIDLen:]
	if rest[0] != '-' {
		return Name{}, false
	}
	rest = rest[1:]
	for _, kind := range kinds {
		if !strings.HasPrefix(rest, kind) {
			continue
		}
		tail := rest[len(kind):]
		if seq, ok := ParseSeq(tail); ok {
			return Name{GUID: guid, Kind: kind, Seq: seq}, true
		}
		if len(tail) > 0 && tail[0] == '@' {
			if i := strings.IndexByte(tail[1:], '@'); i >= 0 {
				anchor, ok1 := ParseSeq(tail[1 : 1+i])
				seq, ok2 := ParseSeq(tail[2+i:])
				if ok1 && ok2 {
					return Name{GUID: guid, Kind: kind, Seq: seq, Anchored: true, Anchor: anchor}, true
				}
			}
		}
	}
	return Name{}, false
}

// Kind returns the kind of name when name is in the grammar for some kind
// (any non-empty kind without "/" or "@": a recipe's own, or another's,
// present or future), and "" when it is in it for none. It is the one
// answer to "could this child be a queue node of this module": a listing
// spots another recipe's nodes with it, and Reserved refuses paths with it.
func Kind(name string) string {
	k := KindOf(name)
	if k == "" {
		return ""
	}
	if _, ok := Parse(name, []string{k}); !ok {
		return ""
	}
	return k
}

// KindOf returns what stands in the kind's place of a name in the grammar
// (between "_c_<guid>-" and the sequence or the first '@'), or "" when the
// name does not have that shape. Parse with that kind says whether the
// whole name is in the grammar.
func KindOf(name string) string {
	head := len(ProtectedPrefix) + GUIDLen + 1
	if len(name) <= head || !strings.HasPrefix(name, ProtectedPrefix) || name[head-1] != '-' {
		return ""
	}
	rest := name[head:]
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		return rest[:i]
	}
	for _, n := range []int{10, 11} {
		if len(rest) > n {
			if _, ok := ParseSeq(rest[len(rest)-n:]); ok {
				return rest[:len(rest)-n]
			}
		}
	}
	return ""
}

// ParseSeq accepts exactly the canonical %010d form of an int32.
func ParseSeq(s string) (int32, bool) {
	if len(s) != 10 && len(s) != 11 {
		return 0, false
	}
	if len(s) == 10 && s[0] != '-' {
		// Ten digits: canonical whatever they are, if they fit (the
		// common case, read without formatting back).
		var v int64
		for i := 0; i < 10; i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int64(c-'0')
		}
		if v > 1<<31-1 {
			return 0, false
		}
		return int32(v), true
	}
	v, err := strconv.ParseInt(s, 10, 32)
	var buf [11]byte
	if err != nil || string(AppendSeq(buf[:0], int32(v))) != s { // no allocation
		return 0, false
	}
	return int32(v), true
}

// AppendSeq appends v formatted the way ZooKeeper does (Java's %010d) to b.
func AppendSeq(b []byte, v int32) []byte {
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

// Reserved returns why path p is reserved ("" if it is not): a segment of
// it is in the grammar (Kind), or is one of the fixed names a recipe
// writes in its directory (FixedNames). A recipe lists its directory's
// children and takes every name in the grammar for a contender, of its own
// kind or of another recipe's (recipe.ErrMixedRecipes); a directory so
// named, the queue directory of a lock "P/_c_<guid>-lock-0000000000" say,
// would make the lock P look held for as long as it exists. A directory
// named like a fixed name would be taken for that record of its parent's
// recipe: the lock "P/_lock-delay" makes P's grants fail while it has
// nodes, and serve a delay afterwards. Every other name, "_c_" prefixed or
// not, is ignored by every listing and stays usable.
func Reserved(p string) string {
	for _, seg := range strings.Split(p, "/") {
		if k := Kind(seg); k != "" {
			return fmt.Sprintf("segment %s is named like a queue node of kind %s (%s<32 hex digits>-<kind><sequence>), "+
				"which the recipes reserve: its parent's recipe would take it for a contender",
				lockname.Quote(seg), lockname.Quote(k), ProtectedPrefix)
		}
		if what, ok := FixedNames[seg]; ok {
			return fmt.Sprintf("segment %s is the name of %s, which the recipes reserve: its parent's recipe would take it for that record",
				lockname.Quote(seg), what)
		}
	}
	return ""
}

// FixedNames are the names, outside the grammar, that a recipe writes in
// its directory beside its queue nodes, with what each is: Reserved
// refuses them as path segments. A recipe that writes a new one adds it
// here (zookeeper's FuzzReservedCoversTheGrammar checks every name the
// engine writes).
var FixedNames = map[string]string{
	MarkerName: "the lock-delay marker a lock keeps in its directory (" + MarkerName + ")",
}

// SeqShapes are one sequence of each shape ZooKeeper may append to a
// sequential create's name: 10 digits, "-" and 9 digits, "-" and 10 digits
// below 2147483648 (which also reads as a kind ending in "-" followed by
// 10 digits), and "-2147483648" (which does not). Whether a name and a
// sequence are in the grammar depends on the sequence through its shape
// only, so the four answer for all 2^32 (FuzzReservedCoversTheGrammar).
var SeqShapes = []string{"0000000000", "-000000001", "-1000000000", "-2147483648"}

// CheckPath checks a znode path given to a recipe, and returns why it is
// refused ("" when it is not): it must be absolute, not the root, have no
// trailing slash, no empty, "." or ".." segments, no characters ZooKeeper
// refuses, be valid UTF-8, stay out of the reserved /zookeeper subtree,
// and have no segment Reserved names (reserved is then true). Chroots are
// checked by it too: a chroot is a directory in the server's tree like
// any other.
func CheckPath(p string) (reason string, reserved bool) {
	switch {
	case p == "":
		return "empty", false
	case p[0] != '/':
		return "not absolute (must start with /)", false
	case p == "/":
		return "the root znode cannot be a recipe directory", false
	case strings.HasSuffix(p, "/"):
		return "trailing slash", false
	case !utf8.ValidString(p):
		return "not valid UTF-8", false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return "empty segment (//)", false
		case ".", "..":
			return "relative segment " + seg, false
		}
	}
	for _, r := range p {
		// ZooKeeper's PathUtils rejects these (it works on UTF-16, so
		// characters beyond U+FFFF arrive as refused surrogates).
		if r <= 0x1f || (r >= 0x7f && r <= 0x9f) ||
			(r >= 0xd800 && r <= 0xf8ff) || r >= 0xfff0 {
			return "contains a character ZooKeeper refuses", false
		}
	}
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return "the /zookeeper subtree is reserved by ZooKeeper", false
	}
	if why := Reserved(p); why != "" {
		return why, true
	}
	return "", false
}

// CheckSequentialPath checks the path p of a sequential create (what
// fencezk's Register.Apply lets a caller send): as CheckPath does, and
// that no name the server can make of it (p followed by a sequence,
// SeqShapes) is in the grammar: "/P/_c_<guid>-lock-" would become a lock
// node of P.
func CheckSequentialPath(p string) (reason string, reserved bool) {
	if why, res := CheckPath(p); why != "" {
		return why, res
	}
	for _, s := range SeqShapes {
		if why := Reserved(p + s); why != "" {
			return "a sequential create there makes names like " + s + ": " + why, true
		}
	}
	return "", false
}
