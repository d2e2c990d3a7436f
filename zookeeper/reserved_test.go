package zookeeper

import (
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// TestReservedSegments (issue 23, finding 4): a path is refused exactly
// when one of its segments is in the node-name grammar, whatever the kind;
// names that merely look close stay usable.
func TestReservedSegments(t *testing.T) {
	const zeros = "00000000000000000000000000000000"
	for _, c := range []struct {
		path string
		kind string // the kind named in the reason; "" when the path is accepted
	}{
		{"/P/_c_" + zeros + "-lock-0000000000", "lock-"}, // the two paths
		{"/P/_c_" + zeros + "-read-0000000000", "read-"},
		{"/P/_c_" + g + "-write-0000000007/sub", "write-"}, // any segment, not only the last
		{"/_c_" + g + "-lease-2147483647/P", "lease-"},
		{"/P/_c_" + g + "-elect--2147483648", "elect-"},
		{"/P/_c_" + g + "-latch--000000001", "latch-"},
		{"/P/_c_" + g + "-read-@0000000003@0000000004", "read-"},     // an anchored node
		{"/P/_c_" + g + "-nobodys-kind-0000000001", "nobodys-kind-"}, // a kind no recipe has (yet)
		{"/P/_c_" + g + "-x0000000001", "x"},
		{"/P/_c_" + g + "--1234567890", "-"},
		// Close, but no queue node: accepted.
		{"/P/_c_" + g + "-lock-1", ""},
		{"/P/_c_" + g + "-lock-00000000001", "lock-0"}, // kinds may end in digits and dashes
		{"/P/_c_" + g + "-lock-2147483648", "lock"},
		{"/P/_c_" + g + "-lock-0000000001-a", ""},
		{"/P/_c_" + g + "-lock-00000001", ""},
		{"/P/_c_" + strings.ToUpper(g) + "-lock-0000000000", ""},
		{"/P/_c_" + g[1:] + "-lock-0000000000", ""},
		{"/P/_c_" + g + "-0000000000", ""}, // no kind
		{"/P/_c_" + g + "-@0000000001@0000000002", ""},
		{"/P/_c_" + g + "-lock-@0000000001", ""},
		{"/P/c_" + g + "-lock-0000000000", ""},
		{"/P/x_c_" + g + "-lock-0000000000", ""},
		{"/P/_c_" + g + "-lock-0000000000x", ""},
		{"/P/_c_locks/lock-0000000000", ""},
		{"/locks/nightly-report-0000000001", ""},
		{"/_c_/lock-", ""},
		// The lock-delay marker's name (issue 37 item 2), in any segment.
		{"/P/" + markerName, "marker"},
		{"/" + markerName + "/P", "marker"},
		{"/P/" + markerName + "x", ""},
		{"/P/x" + markerName, ""},
		{"/P/_lock-delay-0000000001", ""},
	} {
		err := validatePath(c.path)
		if c.kind == "" {
			if err != nil {
				t.Errorf("validatePath(%q) = %v, want nil", c.path, err)
			}
			continue
		}
		var pe *PathError
		if !errors.As(err, &pe) || pe.Path != c.path || !errors.Is(err, ErrReservedName) || !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("validatePath(%q) = %v, want a *PathError matching ErrReservedName and recipe.ErrInvalidPath", c.path, err)
			continue
		}
		if c.kind == "marker" {
			if !strings.Contains(pe.Reason, "lock-delay marker") || !strings.Contains(pe.Reason, "reserve") {
				t.Errorf("validatePath(%q): reason %q, want it to name the marker and the reservation", c.path, pe.Reason)
			}
			continue
		}
		if !strings.Contains(pe.Reason, `of kind "`+c.kind+`"`) || !strings.Contains(pe.Reason, "reserve") {
			t.Errorf("validatePath(%q): reason %q, want it to name kind %q and the reservation", c.path, pe.Reason, c.kind)
		}
	}
}

// TestReservedChroot: a chroot is a directory like any other; one named
// like a queue node is refused by Connect's server-list parsing.
func TestReservedChroot(t *testing.T) {
	_, _, err := splitServers([]string{"127.0.0.1:2181/app/_c_" + g + "-lock-0000000000"})
	if !errors.Is(err, ErrReservedName) || !errors.Is(err, recipe.ErrInvalidPath) {
		t.Fatalf("splitServers with a reserved chroot: %v, want ErrReservedName", err)
	}
}

// TestReservedNamesLongSegment: the reason quotes a long segment shortened,
// as PathError shortens the path: an error stays a few lines long.
func TestReservedNamesLongSegment(t *testing.T) {
	p := "/P/_c_" + g + "-" + strings.Repeat("k", 100000) + "-0000000000"
	err := validatePath(p)
	if !errors.Is(err, ErrReservedName) {
		t.Fatalf("validatePath = %v, want ErrReservedName", err)
	}
	if n := len(err.Error()); n > 600 {
		t.Fatalf("the error of a 100 KB path is %d bytes long", n)
	}
}

// FuzzReservedCoversTheGrammar checks that the rule covers every name the
// engine can create: for any GUID, any kind NewQueue accepts (non-empty,
// no "/", "@" or NUL), any sequence and anchor, the name nodePrefix and
// formatSeq make is refused as a path segment, and so is every fixed name
// a recipe writes beside its nodes (engineNames: the lock-delay marker);
// and any string that parses as a node of some kind is refused too (so a
// listing can never take a directory for a contender, nor another
// recipe's node, nor a record). A new node-name format, a new kind or a
// new record cannot escape it without failing here.
func FuzzReservedCoversTheGrammar(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), "lock-", int32(0), false, int32(0), "_c_"+g+"-read-0000000000")
	f.Add([]byte{1}, "read-", int32(-1), true, int32(7), "x")
	f.Add([]byte{2}, "w2", int32(-2147483648), false, int32(0), "_c_"+g+"-w2-2147483648")
	f.Add([]byte{3}, "-", int32(2147483647), true, int32(-2147483648), "_c_"+g+"-a-@-000000001@0000000000")
	f.Add([]byte{4}, "my-lock-2-", int32(-1234567890), false, int32(0), "_c_"+g+"-k--1234567890")
	f.Add([]byte{5}, "k", int32(-1234567890), false, int32(0), "_c_"+g+"-")
	f.Add([]byte{6}, "k", int32(5), false, int32(0), "_c_"+g+"-a@-000000001@")
	f.Add([]byte{7}, "lock-", int32(1), false, int32(0), "P/"+markerName+"/Q")
	f.Fuzz(func(t *testing.T, guidBytes []byte, kind string, seq int32, anchored bool, anchor int32, other string) {
		kinds := []string{"lock-", "read-", "write-", "lease-", "elect-", "latch-"}
		if kind != "" && !strings.ContainsAny(kind, "/@\x00") { // a kind NewQueue accepts
			kinds = append(kinds, kind)
			name := nodePrefix(fuzzGUID(guidBytes), kind, anchored, anchor) + formatSeq(seq)
			if grammarKind(name) == "" {
				t.Fatalf("the engine's node name %q (kind %q) is outside the grammar", name, kind)
			}
			for _, n := range engineNames(name) {
				if reservedSegment("/P/"+n+"/Q") == "" || validatePath("/P/"+n) == nil {
					t.Fatalf("the engine's name %q (kind %q) is not reserved", n, kind)
				}
			}
			// A sequential create of the engine's own prefix makes such a name.
			if prefix := "/P/" + strings.TrimSuffix(name, formatSeq(seq)); validatePath(prefix) == nil {
				if err := validateSequentialPath(prefix); !errors.Is(err, ErrReservedName) {
					t.Fatalf("validateSequentialPath(%q) = %v, want ErrReservedName", prefix, err)
				}
			}
		}
		// seqShapes stand for every sequence the server may append.
		if prefix := "/P/" + strings.ReplaceAll(other, "/", ""); validatePath(prefix) == nil {
			made := prefix + formatSeq(seq)
			if err := validatePath(made); errors.Is(err, ErrReservedName) && validateSequentialPath(prefix) == nil {
				t.Fatalf("a sequential create at %q can make %q, which is reserved, yet it is accepted", prefix, made)
			}
		}
		for _, seg := range strings.Split(other, "/") {
			ks := kinds
			if k := kindOf(seg); k != "" { // with a kind of the name's own
				ks = append(ks, k)
			}
			if _, ok := parseNodeName(seg, ks); ok && reservedSegment(seg) == "" {
				t.Fatalf("%q parses as a node but is not reserved", seg)
			}
			if _, fixed := fixedNames[seg]; reservedSegment(seg) != "" && grammarKind(seg) == "" && !fixed {
				t.Fatalf("%q is reserved but in the grammar of no kind, nor a fixed name", seg)
			}
		}
	})
}

// TestReservedSequentialPrefixes: a sequential create whose prefix would
// make a queue node's name is refused (fencezk's Apply); other prefixes,
// "_c_" ones too, pass.
func TestReservedSequentialPrefixes(t *testing.T) {
	for _, c := range []struct {
		prefix string
		bad    bool
	}{
		{"/P/_c_" + g + "-lock-", true},
		{"/P/_c_" + g + "-read-@0000000003@", true},
		{"/P/_c_" + g + "-", true}, // a sequence below -999999999 reads as kind "-"
		{"/P/_c_" + g + "-x", true},
		{"/P/_c_" + g, false},
		{"/P/_c_" + g + "-@", false},
		{"/P/job-", false},
		{"/P/_c_job-", false},
	} {
		err := validateSequentialPath(c.prefix)
		if c.bad != errors.Is(err, ErrReservedName) || (c.bad && !errors.Is(err, recipe.ErrInvalidPath)) || (!c.bad && err != nil) {
			t.Errorf("validateSequentialPath(%q) = %v, want refused: %v", c.prefix, err, c.bad)
		}
	}
}

// engineNames returns every name the engine writes in a queue directory
// beside the queue node node: node itself and the records of the recipes,
// made by the engine's own functions (the lock-delay marker, markerPath).
func engineNames(node string) []string {
	return []string{node, path.Base(markerPath("/P"))}
}

// TestFixedNamesOutsideTheGrammar: every fixed name is ignored by every
// listing (outside the grammar), so only the reservation keeps a lock of
// that name out of its parent's directory.
func TestFixedNamesOutsideTheGrammar(t *testing.T) {
	for n := range fixedNames {
		if grammarKind(n) != "" || kindOf(n) != "" {
			t.Errorf("fixed name %q is in the node-name grammar", n)
		}
		if !errors.Is(validatePath("/P/"+n), ErrReservedName) {
			t.Errorf("validatePath(/P/%s) accepted", n)
		}
	}
	if _, ok := fixedNames[markerName]; !ok {
		t.Errorf("markerName %q is not a fixed name", markerName)
	}
}
