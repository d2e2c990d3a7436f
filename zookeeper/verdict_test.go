package zookeeper

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// TestFirstPassByDefinition: firstPass decides what ordering the listing
// and asking FirstHolds decide (the holder, the watched node, the count,
// the re-list skip, another recipe's nodes), on random listings with
// foreign names, another kind, sequences around the wrap, a name sharing
// the caller's sequence, and the caller missing; and it declines anchored
// nodes and nodes past the sequence limit.
func TestFirstPassByDefinition(t *testing.T) {
	q := &Queue{d: qdir{dir: "/p", kinds: []string{"lock-"}},
		contract: ruleContract{rule: FirstHolds, firstHolds: true, grantsLowest: true}}
	r := rand.New(rand.NewPCG(5, 6))
	name := func(kind string, seq int32) string { return nodePrefix(newGUID(), kind, false, 0) + formatSeq(seq) }
	var decided, declined int
	for round := range 20000 {
		base := int32(2147483647 - 20) // around the wrap (past the limit: declined)
		if round%2 == 0 {
			base = int32(r.IntN(1000))
		}
		var children []string
		seqs := r.Perm(40)[:r.IntN(12)]
		for _, s := range seqs {
			children = append(children, name("lock-", base+int32(s)))
		}
		me := name("lock-", base+int32(40+r.IntN(5)))
		if r.IntN(4) > 0 && len(children) > 0 { // the caller is usually listed, anywhere
			i := r.IntN(len(children))
			me = children[i]
		}
		switch r.IntN(12) {
		case 0:
			children = append(children, "foreign", "_c_"+"zz")
		case 1:
			children = append(children, name("other-", base))
		case 2:
			children = append(children, nodePrefix(newGUID(), "lock-", true, base)+formatSeq(base+50))
		case 3: // a name with the caller's sequence (a hostile plain create)
			if n, ok := parseNodeName(me, q.d.kinds); ok {
				children = append(children, name("lock-", n.Seq))
			}
		}
		r.Shuffle(len(children), func(i, j int) { children[i], children[j] = children[j], children[i] })

		got, ok, gotErr := q.firstPass(children, me)
		nodes, k, mixed := parseListing(children, q.d.kinds)
		if mixed {
			if !errors.Is(gotErr, recipe.ErrMixedRecipes) && ok {
				t.Fatalf("%q: another kind (%s) not reported: %v %v", children, k, ok, gotErr)
			}
			continue
		}
		if gotErr != nil {
			t.Fatalf("%q: %v", children, gotErr)
		}
		if !ok {
			declined++
			if !slices.ContainsFunc(nodes, func(n NodeName) bool { return n.Anchored || pastLimit(n.Seq) }) {
				if n, ok := parseNodeName(me, q.d.kinds); ok && !pastLimit(n.Seq) {
					t.Fatalf("%q: declined a listing it can decide", children)
				}
			}
			continue
		}
		decided++
		ref := orderedVerdict(t, q, nodes, me)
		if d := diffVerdict(got, ref); d != "" {
			t.Fatalf("%q, self %s: %s", children, me, d)
		}
	}
	if decided < 1000 || declined < 1000 {
		t.Fatalf("decided %d, declined %d: the cases are not covered", decided, declined)
	}
}

// orderedVerdict is verdictOn's ordered path on parsed nodes.
func orderedVerdict(t *testing.T, q *Queue, nodes []NodeName, me string) verdict {
	self := -1
	for i, n := range nodes {
		if n.Name == me {
			self = i
		}
	}
	if self < 0 {
		return verdict{self: -1}
	}
	holds, watch, err := q.contract.decide(nodes, self)
	if err != nil {
		t.Fatal(err)
	}
	return verdict{nodes: nodes, self: self, holds: holds, watch: watch, listed: len(nodes),
		skip: !holds && q.skipCandidate(nodes, self, watch)}
}

func diffVerdict(got, want verdict) string {
	switch {
	case (got.self < 0) != (want.self < 0):
		return fmt.Sprintf("listed self %v, want %v", got.self >= 0, want.self >= 0)
	case got.self < 0:
		return ""
	case got.holds != want.holds || got.listed != want.listed || got.skip != want.skip:
		return fmt.Sprintf("holds %v listed %d skip %v, want %v %d %v", got.holds, got.listed, got.skip, want.holds, want.listed, want.skip)
	case got.nodes[got.self].Name != want.nodes[want.self].Name:
		return "a different self"
	case len(got.watch) != len(want.watch):
		return fmt.Sprintf("watch %v, want %v", got.watch, want.watch)
	}
	for i := range got.watch {
		if got.nodes[got.watch[i]].Name != want.nodes[want.watch[i]].Name {
			return fmt.Sprintf("watches %s, want %s", got.nodes[got.watch[i]].Name, want.nodes[want.watch[i]].Name)
		}
	}
	return ""
}
