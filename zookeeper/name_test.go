package zookeeper

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

const g = "0123456789abcdef0123456789abcdef"

// TestC1_NodeNameGrammar covers case C1: signed, wrapped sequences behind GUID
// prefixes and kinds that contain digits and dashes.
func TestC1_NodeNameGrammar(t *testing.T) {
	kinds := []string{"lock-", "my-lock-2-", "read-", "w2"}
	cases := []struct {
		name string
		ok   bool
		kind string
		seq  int32
	}{
		{"_c_" + g + "-lock-0000000001", true, "lock-", 1},
		{"_c_" + g + "-lock-2147483647", true, "lock-", 2147483647},
		{"_c_" + g + "-lock--2147483648", true, "lock-", -2147483648},
		{"_c_" + g + "-lock--2147483647", true, "lock-", -2147483647},
		{"_c_" + g + "-lock--000000001", true, "lock-", -1},
		{"_c_" + g + "-my-lock-2-0000000042", true, "my-lock-2-", 42},
		{"_c_" + g + "-my-lock-2--000000042", true, "my-lock-2-", -42},
		{"_c_" + g + "-w20000000007", true, "w2", 7},
		{"_c_" + g + "-read-0000000000", true, "read-", 0},
		// Not ours: foreign names, bad GUIDs, non-canonical sequences.
		{"lock-0000000001", false, "", 0},
		{"_c_" + g + "-lock-1", false, "", 0},
		{"_c_" + g + "-lock-00000000001", false, "", 0},
		{"_c_" + g + "-lock-2147483648", false, "", 0},
		{"_c_" + g + "-lock--1", false, "", 0},
		{"_c_" + g + "-lock-+000000001", false, "", 0},
		{"_c_" + g + "-lock-000000000a", false, "", 0},
		{"_c_" + g + "-other-0000000001", false, "", 0},
		{"_c_0123456789ABCDEF0123456789abcdef-lock-0000000001", false, "", 0},
		{"_c_0123-lock-0000000001", false, "", 0},
		{"_c_" + g + "lock-0000000001", false, "", 0},
		{"_c_" + g + "-", false, "", 0},
		{"", false, "", 0},
		{"zookeeper", false, "", 0},
	}
	for _, c := range cases {
		n, ok := parseNodeName(c.name, kinds)
		if ok != c.ok || (ok && (n.Kind != c.kind || n.Seq != c.seq || n.GUID != g)) {
			t.Errorf("parseNodeName(%q) = %+v, %v; want kind %q seq %d ok %v", c.name, n, ok, c.kind, c.seq, c.ok)
		}
	}
}

func TestFormatSeqMatchesZooKeeper(t *testing.T) {
	for v, want := range map[int32]string{
		0: "0000000000", 5: "0000000005", 2147483647: "2147483647",
		-1: "-000000001", -2147483648: "-2147483648", -2147483647: "-2147483647", -123456789: "-123456789",
	} {
		if got := formatSeq(v); got != want {
			t.Errorf("formatSeq(%d) = %q, want %q", v, got, want)
		}
		if back, ok := parseSeq(want); !ok || back != v {
			t.Errorf("parseSeq(%q) = %d, %v", want, back, ok)
		}
	}
}

// TestC1_WrapAwareOrder: the counter wraps past 2147483647 to negative values;
// order must follow assignment, not numeric value.
func TestC1_WrapAwareOrder(t *testing.T) {
	seqs := []int32{2147483646, 2147483647, -2147483648, -2147483647, -2147483646}
	var names []string
	for i := len(seqs) - 1; i >= 0; i-- { // listed in reverse
		names = append(names, fmt.Sprintf("_c_%s-lock-%s", g, formatSeq(seqs[i])))
	}
	names = append(names, "foreign", "_c_"+g+"-lock-x")
	nodes := parseChildren(names, []string{"lock-"})
	var got []int32
	for _, n := range nodes {
		got = append(got, n.Seq)
	}
	if !slices.Equal(got, seqs) {
		t.Fatalf("order = %v, want %v", got, seqs)
	}
	if !seqLess(2147483647, -2147483648) || seqLess(-2147483648, 2147483647) || !seqLess(1, 2) || seqLess(3, 3) {
		t.Fatal("seqLess is not wrap-aware")
	}
}

func TestFirstHolds(t *testing.T) {
	if h, w := FirstHolds(nil, 0); !h || len(w) != 0 {
		t.Fatal("index 0 must hold")
	}
	if h, w := FirstHolds(nil, 3); h || len(w) != 1 || w[0] != 2 {
		t.Fatal("index 3 must watch 2")
	}
}

func TestAnchoredNames(t *testing.T) {
	kinds := []string{"read-", "write-"}
	mk := func(kind string, anchored bool, anchor, seq int32) string {
		return nodePrefix(g, kind, anchored, anchor) + formatSeq(seq)
	}
	n, ok := parseNodeName(mk("read-", true, -5, 7), kinds)
	if !ok || !n.Anchored || n.Anchor != -5 || n.Seq != 7 || n.Kind != "read-" || n.pos() != -5 {
		t.Fatalf("anchored name parsed as %+v, %v", n, ok)
	}
	for _, bad := range []string{"_c_" + g + "-read-@0000000001", "_c_" + g + "-read-@1@0000000002", "_c_" + g + "-read-@0000000001@", "_c_" + g + "-read-@0000000001@@0000000002"} {
		if n, ok := parseNodeName(bad, kinds); ok {
			t.Errorf("%q parsed as %+v", bad, n)
		}
	}
	// C13's queue: A's write (1), B's write (2), A's downgrade read anchored
	// to 1 (seq 3), C's read (4). Queue order: A-w, A-r, B-w, C-r.
	names := []string{mk("read-", false, 0, 4), mk("write-", false, 0, 2), mk("read-", true, 1, 3), mk("write-", false, 0, 1)}
	nodes := parseChildren(names, kinds)
	var got []int32
	for _, n := range nodes {
		got = append(got, n.Seq)
	}
	if want := []int32{1, 3, 2, 4}; !slices.Equal(got, want) {
		t.Fatalf("queue order %v, want %v", got, want)
	}
	// Once the anchor is gone, the anchored node still sorts before B.
	nodes = parseChildren(names[:3], kinds)
	if nodes[0].Seq != 3 || nodes[1].Seq != 2 {
		t.Fatalf("without its anchor the read must stay first: %+v", nodes)
	}
}

func FuzzParseNodeName(f *testing.F) {
	for _, s := range []string{"_c_" + g + "-lock-0000000001", "_c_" + g + "-lock--2147483648", "lock-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		n, ok := parseNodeName(name, []string{"lock-", "my-lock-2-"})
		if ok && nodePrefix(n.GUID, n.Kind, n.Anchored, n.Anchor)+formatSeq(n.Seq) != name {
			t.Fatalf("parse of %q does not round-trip: %+v", name, n)
		}
	})
}

// TestFormatSeqIsPercent010d: formatSeq (allocation-free since appendSeq)
// formats like Java's and Go's %010d, the form ZooKeeper names sequential
// nodes with, at the edges and at random values; parseSeq accepts exactly
// that form.
func TestFormatSeqIsPercent010d(t *testing.T) {
	vals := []int32{0, 1, 9, 10, 999999999, 1000000000, 2147483647, -1, -9, -10, -99999999, -100000000, -999999999, -1000000000, -2147483647, -2147483648}
	r := rand.New(rand.NewPCG(5, 6))
	for range 10000 {
		vals = append(vals, int32(r.Uint32()))
	}
	for _, v := range vals {
		want := fmt.Sprintf("%010d", v)
		if got := formatSeq(v); got != want {
			t.Fatalf("formatSeq(%d) = %q, want %q", v, got, want)
		}
		if got, ok := parseSeq(want); !ok || got != v {
			t.Fatalf("parseSeq(%q) = %d, %v", want, got, ok)
		}
	}
	for _, bad := range []string{"-000000000", "000000001", "+000000001", "00000000001", "2147483648", "-2147483649", "0x00000001"} {
		if v, ok := parseSeq(bad); ok {
			t.Errorf("parseSeq(%q) accepted as %d", bad, v)
		}
	}
}

func TestParseListingOtherKind(t *testing.T) {
	g := strings.Repeat("ab", 16)
	for _, tc := range []struct {
		children []string
		want     string
		found    bool
	}{
		{[]string{"_c_" + g + "-lock-0000000001"}, "", false},
		{[]string{"foo", "_c_zz-lock-abc", "_c_" + g + "-lock-0000000001"}, "", false},
		{[]string{"_c_" + g + "-lock-0000000001", "_c_" + g + "-lease-0000000002"}, "lease-", true},
		{[]string{"_c_" + g + "-read-@0000000001@0000000003"}, "read-", true},
		{[]string{"_c_" + g + "-lease--2147483648"}, "lease-", true},
		{[]string{"_c_" + g + "-lease-12"}, "", false},                                   // no canonical sequence
		{[]string{"_c_" + strings.Repeat("z", 32) + "-lease-0000000002"}, "", false},     // not a GUID
		{[]string{"_c_6f1d3a9e-1111-2222-3333-444455556666-lock-0000000001"}, "", false}, // Curator's protected name
	} {
		_, got, found := parseListing(tc.children, []string{"lock-"})
		if got != tc.want || found != tc.found {
			t.Errorf("parseListing(%q) = %q, %v; want %q, %v", tc.children, got, found, tc.want, tc.found)
		}
	}
}

// parseChildren is parseListing's parsed and ordered nodes.
func parseChildren(children []string, kinds []string) []NodeName {
	nodes, _, _ := parseListing(children, kinds)
	return nodes
}

// TestSortNodesKeyed: a listing longer than keyedSortMin is sorted by packed
// keys; the order must be compareNodes's exactly, across the wrap of the
// sequence counter, with anchored nodes sharing their anchor's position and
// several anchored to one anchor.
func TestSortNodesKeyed(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for round := 0; round < 300; round++ {
		base := int32(r.Uint32())
		if round%3 == 0 {
			base = math.MaxInt32 - int32(r.IntN(200)) // across the wrap
		}
		n := keyedSortMin + 1 + r.IntN(300)
		nodes := make([]NodeName, n)
		for i := range nodes {
			seq := base + int32(r.IntN(4*n)) // wraps in two's complement
			nd := NodeName{Name: nodePrefix(newGUID(), "lock-", false, 0) + formatSeq(seq), Kind: "lock-", Seq: seq}
			if r.IntN(4) == 0 {
				nd.Anchored, nd.Anchor = true, base+int32(r.IntN(4*n))
			}
			nodes[i] = nd
		}
		want := slices.Clone(nodes)
		slices.SortFunc(want, compareNodes)
		got := slices.Clone(nodes)
		sortNodes(got)
		if !slices.Equal(got, want) {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("round %d (base %d, %d nodes): index %d is %+v, want %+v", round, base, n, i, got[i], want[i])
				}
			}
		}
	}
}
