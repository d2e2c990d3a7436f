package zookeeper

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// fuzzKinds are node kinds that stress the grammar: kinds that contain digits
// and dashes, a kind that ends in a digit, and kinds sharing a first letter.
var fuzzKinds = []string{"lock-", "my-lock-2-", "read-", "write-", "w2"}

// fuzzGUID turns fuzz bytes into a GUID: 16 bytes (cut or zero-padded) in
// lowercase hex, as newGUID makes them.
func fuzzGUID(b []byte) string {
	var g [16]byte
	copy(g[:], b)
	return hex.EncodeToString(g[:])
}

// FuzzNodeNameGrammar checks the node-name grammar both ways:
//
//   - every name this module can create (_c_<guid>-<kind><seq> for any GUID,
//     kind and int32 sequence) parses back to exactly its parts, alone and
//     through parseListing;
//   - every string that parses (the fuzzer mutates the name as well) is in
//     the canonical form: 32 lowercase hex digits, one of the kinds, a
//     sequence whose %010d form is the suffix; printing the parts gives the
//     name back.
func FuzzNodeNameGrammar(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), uint8(0), int32(1), "")
	f.Add([]byte{0xff, 0, 0x10}, uint8(1), int32(-1), "x")
	f.Add([]byte{}, uint8(2), int32(2147483647), "_c_0123456789abcdef0123456789abcdef-lock-2147483648")
	f.Add([]byte{1}, uint8(3), int32(-2147483648), "_c_0123456789abcdef0123456789abcdef-w2-000000001")
	f.Add([]byte{2}, uint8(4), int32(0), "_c_0123456789ABCDEF0123456789abcdef-lock-0000000001")
	f.Add([]byte{3}, uint8(4), int32(20), "_c_0123456789abcdef0123456789abcdef-w20000000020")
	f.Add([]byte{4}, uint8(1), int32(-123456789), "_c_0123456789abcdef0123456789abcdef-my-lock-2--123456789")
	f.Add([]byte{5}, uint8(0x81), int32(42), "_c_0123456789abcdef0123456789abcdef-lock-@0000000007@0000000042")
	f.Add([]byte{6}, uint8(0x80), int32(-5), "_c_0123456789abcdef0123456789abcdef-lock-@-000000001@-000000002")
	f.Fuzz(func(t *testing.T, guidBytes []byte, kindIdx uint8, seq int32, mutated string) {
		guid := fuzzGUID(guidBytes)
		kind := fuzzKinds[int(kindIdx)%len(fuzzKinds)]
		anchored, anchor := kindIdx&0x80 != 0, int32(0)
		if anchored {
			anchor = seq/3 - 7 // any int32: an anchored node's anchor
		}
		name := nodePrefix(guid, kind, anchored, anchor) + formatSeq(seq)
		n, ok := parseNodeName(name, fuzzKinds)
		want := NodeName{Name: name, GUID: guid, Kind: kind, Seq: seq, Anchored: anchored, Anchor: anchor}
		if !ok || n != want {
			t.Fatalf("parseNodeName(%q) = %+v, %v; want %+v", name, n, ok, want)
		}
		if got := parseChildren([]string{"foreign", name, mutated + "~"}, fuzzKinds); len(got) != 1 || got[0] != want {
			t.Fatalf("parseChildren kept %+v, want just %+v", got, want)
		}
		if _, ok := parseNodeName(name, nil); ok {
			t.Fatalf("%q parsed with no kinds", name)
		}

		n, ok = parseNodeName(mutated, fuzzKinds)
		if !ok {
			return
		}
		if n.Name != mutated || len(n.GUID) != guidLen || strings.Trim(n.GUID, "0123456789abcdef") != "" ||
			!slices.Contains(fuzzKinds, n.Kind) {
			t.Fatalf("parseNodeName(%q) = %+v: parts not in the grammar", mutated, n)
		}
		if back := nodePrefix(n.GUID, n.Kind, n.Anchored, n.Anchor) + formatSeq(n.Seq); back != mutated {
			t.Fatalf("parseNodeName(%q) = %+v, which prints as %q", mutated, n, back)
		}
		if s, ok := parseSeq(formatSeq(n.Seq)); !ok || s != n.Seq {
			t.Fatalf("sequence %d does not round-trip through formatSeq/parseSeq", n.Seq)
		}
	})
}

// FuzzSeqOrder checks seqLess and sortNodes on sets of sequences that span
// less than 2^31 (all ZooKeeper can hold under one parent), starting
// anywhere, so across the wrap from 2147483647 to -2147483648: seqLess is the
// order in which the sequences were assigned (a strict order: irreflexive,
// antisymmetric, total on distinct values) and sortNodes sorts by it, ties
// broken by name, keeping every node.
func FuzzSeqOrder(f *testing.F) {
	f.Add(int32(0), []byte{0, 0, 0, 1, 0, 0, 0, 2})
	f.Add(int32(2147483646), []byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3})
	f.Add(int32(-2147483648), []byte{0x3f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0x3f, 0xff, 0xff, 0xff})
	f.Add(int32(-1), []byte{0, 0, 0, 5, 0, 0, 0, 5, 0, 0, 0, 1})
	f.Add(int32(1073741824), []byte{0x3f, 0xff, 0xff, 0xfe, 0, 0, 0, 0, 0x20, 0, 0, 0})
	f.Fuzz(func(t *testing.T, base int32, raw []byte) {
		// Offsets from base below 2^30: any two differ by less than 2^31.
		type node struct {
			n   NodeName
			off uint32
		}
		var nodes []node
		for i := 0; i+4 <= len(raw) && len(nodes) < 64; i += 4 {
			off := binary.BigEndian.Uint32(raw[i:]) & (1<<30 - 1)
			seq := int32(uint32(base) + off)
			name := nodePrefix(fuzzGUID([]byte{byte(len(nodes) * 37)}), "lock-", false, 0) + formatSeq(seq)
			nodes = append(nodes, node{NodeName{Name: name, GUID: name[3:35], Kind: "lock-", Seq: seq}, off})
		}
		for _, a := range nodes {
			if seqLess(a.n.Seq, a.n.Seq) {
				t.Fatalf("seqLess(%d, %d) is true", a.n.Seq, a.n.Seq)
			}
			for _, b := range nodes {
				if got, want := seqLess(a.n.Seq, b.n.Seq), a.off < b.off; got != want {
					t.Fatalf("seqLess(%d, %d) = %v, but they were assigned at offsets %d and %d from %d",
						a.n.Seq, b.n.Seq, got, a.off, b.off, base)
				}
			}
		}

		sorted := make([]NodeName, len(nodes))
		names := make([]string, len(nodes))
		for i, nd := range nodes {
			sorted[i] = nd.n
			names[len(nodes)-1-i] = nd.n.Name // reversed, for parseChildren
		}
		sortNodes(sorted)
		offOf := make(map[string]uint32, len(nodes))
		for _, nd := range nodes {
			offOf[nd.n.Name] = nd.off
		}
		for i := 1; i < len(sorted); i++ {
			p, c := sorted[i-1], sorted[i]
			if offOf[p.Name] > offOf[c.Name] || (offOf[p.Name] == offOf[c.Name] && p.Name > c.Name) {
				t.Fatalf("sortNodes put %s (offset %d) before %s (offset %d)", p.Name, offOf[p.Name], c.Name, offOf[c.Name])
			}
		}
		key := func(ns []NodeName) []string {
			out := make([]string, len(ns))
			for i, n := range ns {
				out[i] = fmt.Sprint(n)
			}
			slices.Sort(out)
			return out
		}
		orig := make([]NodeName, len(nodes))
		for i, nd := range nodes {
			orig[i] = nd.n
		}
		if !slices.Equal(key(sorted), key(orig)) {
			t.Fatalf("sortNodes changed the set of nodes: %v -> %v", orig, sorted)
		}
		if got := parseChildren(names, []string{"lock-"}); !slices.Equal(got, sorted) {
			t.Fatalf("parseChildren of the names = %v, want the sorted nodes %v", got, sorted)
		}
	})
}
