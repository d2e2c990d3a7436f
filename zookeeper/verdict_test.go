package zookeeper

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestFirstPassByDefinition: verdictOn with the one pass (firstPass)
// decides what it decides without it (ordering the listing and asking
// FirstHolds): the same error text, holder, watched node, count, kind,
// re-list skip and ErrLocked text, on random listings of up to 48 nodes
// (past the keyed sort's threshold) over several kind sets (one a prefix
// of another), GrantsLowest or not, GUIDs and sequences shared by several
// nodes (a hostile client names its nodes as it likes), sequences at 0
// and 2147483646, foreign, anchored and other recipes' names, and a
// caller's name that is foreign, of another kind or not listed. Listings
// with a node past the sequence limit are left out: ordering them reads
// the server (TestFirstPassDeclinesPastLimit).
func TestFirstPassByDefinition(t *testing.T) {
	kindSets := [][]string{{"lock-"}, {"read-", "write-"}, {"a", "a1"}, {"lock-", "lock-1"}}
	r := rand.New(rand.NewPCG(11, 12))
	guids := make([]string, 6)
	for i := range guids {
		guids[i] = newGUID()
	}
	var decided, mixed, skips int
	for round := range 20000 {
		kinds := kindSets[round%len(kindSets)]
		lowest := r.IntN(2) == 0
		one := &Queue{d: qdir{dir: "/p", kinds: kinds}, contract: ruleContract{rule: FirstHolds, firstHolds: true, grantsLowest: lowest}}
		ordered := &Queue{d: qdir{dir: "/p", kinds: kinds}, contract: ruleContract{rule: FirstHolds, grantsLowest: lowest}}
		children, me := randomListing(r, kinds, guids)
		if pastTheLimit(children, kinds) {
			continue
		}
		if _, ok, _ := one.firstPass(children, me); ok {
			decided++
		}
		v1, e1 := one.verdictOn(context.Background(), &one.contract, children, me, nil, true)
		v2, e2 := ordered.verdictOn(context.Background(), &ordered.contract, children, me, nil, true)
		if fmt.Sprint(e1) != fmt.Sprint(e2) {
			t.Fatalf("%q, self %s: error %v, want %v", children, me, e1, e2)
		}
		if e1 != nil {
			mixed++
			continue
		}
		if d := diffVerdict(v1, v2); d != "" {
			t.Fatalf("kinds %q, lowest %v, %q, self %s: %s", kinds, lowest, children, me, d)
		}
		if v1.skip {
			skips++
		}
		if v1.self >= 0 && !v1.holds {
			p1, _ := one.contract.watchPaths("/p", v1.nodes, v1.self, v1.watch)
			p2, _ := ordered.contract.watchPaths("/p", v2.nodes, v2.self, v2.watch)
			m1, m2 := one.contract.locked(v1.nodes[v1.self].Name, p1), ordered.contract.locked(v2.nodes[v2.self].Name, p2)
			if m1.Error() != m2.Error() {
				t.Fatalf("ErrLocked %q, want %q", m1, m2)
			}
		}
	}
	t.Logf("decided %d, mixed %d, skips %d", decided, mixed, skips)
	if decided < 6000 || mixed < 200 || skips < 200 {
		t.Fatalf("decided %d, mixed %d, skips %d: the cases are not covered", decided, mixed, skips)
	}
}

// pastTheLimit reports whether a node of the listing is past the sequence
// limit or anchored past it.
func pastTheLimit(children, kinds []string) bool {
	for _, c := range children {
		if n, ok := parseNodeName(c, kinds); ok && (pastLimit(n.Seq) || pastLimit(n.pos())) {
			return true
		}
	}
	return false
}

// randomListing returns a listing of a queue of kinds and the caller's
// name.
func randomListing(r *rand.Rand, kinds, guids []string) (children []string, me string) {
	var base int32
	switch r.IntN(4) {
	case 0:
		base = 0
	case 1:
		base = 2147483646 - 60
	case 2:
		base = int32(r.IntN(1 << 30))
	default:
		base = int32(r.IntN(100))
	}
	spread := 1 + r.IntN(70)
	seq := func() int32 {
		if v := base + int32(r.IntN(spread)); r.IntN(30) > 0 && v <= 2147483646 {
			return v
		}
		return 2147483646
	}
	gen := func() string {
		g := guids[r.IntN(len(guids))]
		if r.IntN(3) == 0 {
			g = newGUID()
		}
		return nodePrefix(g, kinds[r.IntN(len(kinds))], false, 0) + formatSeq(seq())
	}
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			children = append(children, s)
		}
	}
	for range r.IntN(49) {
		add(gen())
	}
	switch r.IntN(20) {
	case 0:
		add("foreign")
		add("_c_zz")
		add(protectedPrefix + newGUID() + "-" + kinds[0] + "12")
	case 1:
		add(nodePrefix(newGUID(), "other-", false, 0) + formatSeq(base))
	case 2:
		add(nodePrefix(newGUID(), kinds[0], true, base) + formatSeq(base+1))
	}
	switch x := r.IntN(10); {
	case x < 6 && len(children) > 0:
		me = children[r.IntN(len(children))]
	case x == 6:
		me = "foreign-self"
	case x == 7:
		me = nodePrefix(newGUID(), "zzz-", false, 0) + formatSeq(base)
	default:
		me = gen()
		if r.IntN(2) == 0 {
			add(me)
		}
	}
	r.Shuffle(len(children), func(i, j int) { children[i], children[j] = children[j], children[i] })
	return children, me
}

// TestFirstPassDeclinesPastLimit: a node past the sequence limit, the
// caller's or another's, leaves the decision to the ordered path (which
// orders by creation there).
func TestFirstPassDeclinesPastLimit(t *testing.T) {
	q := &Queue{d: qdir{dir: "/p", kinds: []string{"lock-"}}, contract: ruleContract{rule: FirstHolds, firstHolds: true, grantsLowest: true}}
	a := nodePrefix(newGUID(), "lock-", false, 0) + formatSeq(2147483646)
	b := nodePrefix(newGUID(), "lock-", false, 0) + formatSeq(2147483647)
	c := nodePrefix(newGUID(), "lock-", false, 0) + formatSeq(-2147483648)
	for _, l := range [][]string{{a, b}, {b, a}, {a, c}, {c, a}} {
		for _, me := range l {
			if _, ok, err := q.firstPass(l, me); ok || err != nil {
				t.Fatalf("%q, self %s: decided (%v)", l, me, err)
			}
		}
	}
}

// TestIsFirstHolds: only FirstHolds itself takes the one pass; a Rule that
// wraps it is asked as any other Rule.
func TestIsFirstHolds(t *testing.T) {
	var none Rule
	wrapped := func(n []NodeName, s int) (bool, []int) { return FirstHolds(n, s) }
	var alias Rule = FirstHolds
	if isFirstHolds(none) || isFirstHolds(wrapped) || !isFirstHolds(alias) {
		t.Fatal("isFirstHolds")
	}
}

// TestVerdictAsksTheRuleOnce: the re-list skip's question to the Rule is
// asked only for a waiter that may skip (an early lease).
func TestVerdictAsksTheRuleOnce(t *testing.T) {
	calls := 0
	rule := func(n []NodeName, s int) (bool, []int) { calls++; return FirstHolds(n, s) }
	q := &Queue{d: qdir{dir: "/p", kinds: []string{"s-"}}, contract: ruleContract{rule: rule, grantsLowest: true}}
	first := nodePrefix(newGUID(), "s-", false, 0) + formatSeq(1)
	me := nodePrefix(newGUID(), "s-", false, 0) + formatSeq(2)
	for _, mayskip := range []bool{false, true} {
		calls = 0
		v, err := q.verdictOn(context.Background(), &q.contract, []string{first, me}, me, nil, mayskip)
		if want := map[bool]int{false: 1, true: 2}[mayskip]; err != nil || v.skip != mayskip || calls != want {
			t.Fatalf("mayskip %v: skip %v, %d calls (want %d), %v", mayskip, v.skip, calls, want, err)
		}
	}
}

func diffVerdict(got, want verdict) string {
	switch {
	case (got.self < 0) != (want.self < 0):
		return fmt.Sprintf("listed self %v, want %v", got.self >= 0, want.self >= 0)
	case got.self < 0:
		return ""
	case got.holds != want.holds || got.listed != want.listed || got.skip != want.skip:
		return fmt.Sprintf("holds %v listed %d skip %v, want %v %d %v", got.holds, got.listed, got.skip, want.holds, want.listed, want.skip)
	case got.nodes[got.self].Name != want.nodes[want.self].Name || got.nodes[got.self].Kind != want.nodes[want.self].Kind:
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
