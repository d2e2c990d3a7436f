package zookeeper

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// serverSeqs models the sequences a ZooKeeper server assigns in one
// directory, n creates from a counter at start: 3.5 and later (stuck) keep
// the stored counter at math.MaxInt32 once there, and a create pipelined
// behind one in flight gets the in-flight change's overflowed value
// (-2147483648, -2147483647, ...); 3.4 (stuck false) wraps. burst says
// whether create i was pipelined behind create i-1.
func serverSeqs(start int32, n int, stuck bool, burst func(i int) bool) []int32 {
	seqs := make([]int32, n)
	stored, pending := start, start // the tree's counter, the in-flight change's
	for i := range seqs {
		cur := stored
		if i > 0 && burst(i) {
			cur = pending
		}
		seqs[i] = cur
		next := int32(uint32(cur) + 1) // Java's int overflow
		pending = next
		if !stuck || next > stored {
			stored = next
		}
	}
	return seqs
}

// TestCreationOrderAtLimit: whatever the counter does at its limit (stuck
// at 2147483647 with pipelined creates given negative values, or wrapped as
// on 3.4), a listing of live nodes ordered as the engine orders it (sorted,
// then compareCreation with the czxids order reads) is their creation
// order. This is what makes every Rule's answer, and the re-list skip's
// "a new node sorts after ours", hold at the limit.
func TestCreationOrderAtLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 300 {
		stuck := run%3 != 0
		start := int32(math.MaxInt32 - rng.IntN(20))
		n := 2 + rng.IntN(60)
		p := rng.Float64()
		seqs := serverSeqs(start, n, stuck, func(int) bool { return rng.Float64() < p })
		var created []NodeName // in creation order, czxid increasing
		for i, seq := range seqs {
			created = append(created, NodeName{Name: nodePrefix(newGUID(), "lock-", false, 0) + formatSeq(seq), Kind: "lock-", Seq: seq, czxid: int64(1000 + i)})
		}
		// A random subset is still alive.
		live := slices.DeleteFunc(slices.Clone(created), func(NodeName) bool { return rng.IntN(3) == 0 })
		listing := slices.Clone(live)
		rng.Shuffle(len(listing), func(i, j int) { listing[i], listing[j] = listing[j], listing[i] })
		got := orderModel(listing)
		if !slices.EqualFunc(got, live, func(a, b NodeName) bool { return a.Name == b.Name }) {
			t.Fatalf("run %d (stuck %v): ordered %v, created %v", run, stuck, seqsOf(got), seqsOf(live))
		}
	}
}

// orderModel is Queue.order without the reads: the czxids are known.
func orderModel(nodes []NodeName) []NodeName {
	sortNodes(nodes)
	if slices.ContainsFunc(nodes, func(n NodeName) bool { return pastLimit(n.Seq) || pastLimit(n.pos()) }) {
		slices.SortFunc(nodes, compareCreation)
	}
	return nodes
}

func seqsOf(nodes []NodeName) []int32 {
	out := make([]int32, len(nodes))
	for i, n := range nodes {
		out[i] = n.Seq
	}
	return out
}

// TestCompareCreationAnchored: at the limit, a node anchored to a position
// before it keeps its anchor's place: after the anchor, before every node
// created after the anchor, the stuck ones included.
func TestCompareCreationAnchored(t *testing.T) {
	w := NodeName{Name: "w", Kind: "write-", Seq: math.MaxInt32 - 2, czxid: 10}
	x := NodeName{Name: "x", Kind: "write-", Seq: math.MaxInt32 - 1, czxid: 11}
	stuck1 := NodeName{Name: "s1", Kind: "write-", Seq: math.MaxInt32, czxid: 12}
	stuck2 := NodeName{Name: "s2", Kind: "write-", Seq: math.MaxInt32, czxid: 13}
	r := NodeName{Name: "r", Kind: "read-", Seq: math.MaxInt32, Anchored: true, Anchor: math.MaxInt32 - 2, czxid: 14}
	neg := NodeName{Name: "n", Kind: "write-", Seq: math.MinInt32, czxid: 15}
	want := []NodeName{w, r, x, stuck1, stuck2, neg}
	got := orderModel([]NodeName{neg, stuck2, r, x, stuck1, w})
	if !slices.EqualFunc(got, want, func(a, b NodeName) bool { return a.Name == b.Name }) {
		var names []string
		for _, n := range got {
			names = append(names, n.Name)
		}
		t.Fatalf("order %v, want w r x s1 s2 n", names)
	}
}

func TestPastLimit(t *testing.T) {
	for seq, want := range map[int32]bool{0: false, 1: false, math.MaxInt32 - 1: false, math.MaxInt32: true, -1: true, math.MinInt32: true} {
		if got := pastLimit(seq); got != want {
			t.Errorf("pastLimit(%d) = %v, want %v", seq, got, want)
		}
	}
}
