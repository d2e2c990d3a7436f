package zookeeper

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// benchKinds are the kinds of a read-write lock, so that parsing tries more
// than one kind.
var benchKinds = []string{"read-", "write-"}

// benchListing returns n children of a queue directory as ZooKeeper lists
// them (unordered), one in ten foreign, with sequences that wrap past
// 2147483647 halfway through.
func benchListing(n int) []string { return benchListingFrom(n, 2147483647-int32(n/2)) }

// benchListingFrom is benchListing with sequences from first on.
func benchListingFrom(n int, first int32) []string {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]string, 0, n)
	for i := range n {
		if i%10 == 9 {
			out = append(out, fmt.Sprintf("foreign-%d", i))
			continue
		}
		seq := first + int32(i) // may wrap to negative
		guid := fmt.Sprintf("%032x", r.Uint64())
		out = append(out, nodePrefix(guid, benchKinds[i%2], false, 0)+formatSeq(seq))
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

var benchSizes = []int{2, 10, 32, 100, 1000}

// BenchmarkParseNodeName parses one protected name with a wrapped sequence.
func BenchmarkParseNodeName(b *testing.B) {
	name := nodePrefix("0123456789abcdef0123456789abcdef", "write-", false, 0) + formatSeq(-2147483648)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := parseNodeName(name, benchKinds); !ok {
			b.Fatal("no parse")
		}
	}
}

// BenchmarkParseChildren parses and orders a listing with parseListing, as
// every wakeup of a waiter does.
func BenchmarkParseChildren(b *testing.B) {
	for _, n := range benchSizes {
		children := benchListing(n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				parseChildren(children, benchKinds)
			}
		})
	}
}

// BenchmarkSortNodes orders a parsed, shuffled listing; each iteration
// copies one of 16 shuffles of it first (the copy is timed too: stopping
// the timer per iteration costs more than the sort, and with -benchmem
// reads the memory statistics each time).
func BenchmarkSortNodes(b *testing.B) {
	for _, n := range benchSizes {
		nodes := parseChildren(benchListing(n), benchKinds)
		r := rand.New(rand.NewPCG(3, 4))
		shuffles := make([][]NodeName, 16)
		for i := range shuffles {
			shuffles[i] = slices.Clone(nodes)
			r.Shuffle(len(nodes), func(x, y int) { shuffles[i][x], shuffles[i][y] = shuffles[i][y], shuffles[i][x] })
		}
		work := make([]NodeName, len(nodes))
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				copy(work, shuffles[i%len(shuffles)])
				i++
				sortNodes(work)
			}
		})
	}
}

// BenchmarkFirstHolds is the queue decision over a parsed listing, as the
// engine makes it: find the caller's node by name, then apply the Rule (here
// for the last node, which searches the whole listing).
func BenchmarkFirstHolds(b *testing.B) {
	for _, n := range benchSizes {
		nodes := parseChildren(benchListing(n), benchKinds)
		name := nodes[len(nodes)-1].Name
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				self := slices.IndexFunc(nodes, func(x NodeName) bool { return x.Name == name })
				if holds, watch := FirstHolds(nodes, self); holds != (self == 0) || (!holds && (len(watch) != 1 || watch[0] != self-1)) {
					b.Fatalf("FirstHolds(%d) = %v, %v", self, holds, watch)
				}
			}
		})
	}
}

// BenchmarkVerdict is a waiter's decision on a listing of a FirstHolds
// queue, the caller's node last in queue order: in one pass (firstPass)
// and by ordering the listing and asking the Rule (the path of every
// other Rule).
func BenchmarkVerdict(b *testing.B) {
	q := &Queue{d: qdir{dir: "/bench", kinds: benchKinds},
		contract: ruleContract{rule: FirstHolds, firstHolds: true, grantsLowest: true}}
	for _, n := range benchSizes {
		children := benchListingFrom(n, 1000) // not near the limit: firstPass decides
		nodes := parseChildren(children, benchKinds)
		me := nodes[len(nodes)-1].Name
		b.Run(fmt.Sprintf("pass/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if v, ok, err := q.firstPass(children, me); !ok || err != nil || v.self < 0 {
					b.Fatal(v, ok, err)
				}
			}
		})
		b.Run(fmt.Sprintf("ordered/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				nodes, _, _ := parseListing(children, benchKinds)
				self := slices.IndexFunc(nodes, func(x NodeName) bool { return x.Name == me })
				if _, _, err := q.contract.decide(nodes, self); err != nil || self < 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
