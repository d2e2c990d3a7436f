package zookeeper

import (
	"context"
	"reflect"
)

// verdict is the Rule's answer on one listing for the caller's node, with
// what the loop needs of the listing: the nodes the answer names in queue
// order, the caller's index among them, how many nodes of the queue's
// kinds were listed, and whether the re-list skip applies to a deletion
// of the watched node (skipCandidate).
type verdict struct {
	nodes  []NodeName // the listing in queue order; after firstPass, the predecessor (if any) and self
	self   int        // the caller's index in nodes; -1 when it is not listed
	holds  bool
	watch  []int // indexes in nodes
	listed int
	skip   bool
}

// isFirstHolds reports whether rule is FirstHolds itself.
func isFirstHolds(rule Rule) bool {
	return reflect.ValueOf(rule).Pointer() == reflect.ValueOf(FirstHolds).Pointer()
}

// verdictOn parses and orders a listing, finds the caller's node (name) in
// it and asks c's Rule (the queue's, or the one of its directory's data:
// contractAt); with mayskip (a waiter with an early lease) it also says
// whether the re-list skip applies. Another recipe's nodes are
// recipe.ErrMixedRecipes; a Rule that panics is recipe.ErrBadOption
// (decide).
func (q *Queue) verdictOn(ctx context.Context, c *ruleContract, children []string, name string, czxids map[string]int64, mayskip bool) (verdict, error) {
	if c.firstHolds && !c.anchors {
		if v, ok, err := q.firstPass(children, name); ok || err != nil {
			v.skip = v.skip && mayskip
			return v, err
		}
	}
	nodes, self, err := q.d.find(ctx, children, name, czxids)
	if err != nil || self < 0 {
		return verdict{self: -1}, err
	}
	holds, watch, err := c.decide(nodes, self)
	if err != nil {
		return verdict{self: -1}, err
	}
	v := verdict{nodes: nodes, self: self, holds: holds, watch: watch, listed: len(nodes)}
	v.skip = mayskip && !holds && c.skipCandidate(nodes, self, watch)
	return v, nil
}

// firstPass decides FirstHolds for a queue without anchors in one pass
// over the unordered listing: the caller's node holds when no node of the
// queue's kinds is before it in queue order (compareNodes), and otherwise
// watches the last node before it. That is what ordering the listing and
// asking FirstHolds decide, without ordering it: a waiter re-lists the
// whole queue at every wakeup, and the order cost a 32-node listing more
// than the rest of its parse (BenchmarkVerdict). ok is false, and the loop
// orders the listing, when the pass cannot decide: a node is anchored or
// past the sequence limit (ordered by creation then: limit.go), or name
// does not parse. Another recipe's node is recipe.ErrMixedRecipes, as in
// parseListing.
func (q *Queue) firstPass(children []string, name string) (v verdict, ok bool, err error) {
	me, ok := parseNodeName(name, q.d.kinds)
	if !ok || pastLimit(me.Seq) {
		return v, false, nil
	}
	var pred NodeName
	before, found := 0, false
	for _, c := range children {
		n, ok := parseNodeName(c, q.d.kinds)
		if !ok {
			if k := grammarKind(c); k != "" {
				return v, false, q.d.mixed(k)
			}
			continue
		}
		if n.Anchored || pastLimit(n.Seq) {
			return v, false, nil
		}
		v.listed++
		switch {
		case n.Name == name:
			found = true
		case compareNodes(n, me) < 0:
			if before++; before == 1 || compareNodes(pred, n) < 0 {
				pred = n
			}
		}
	}
	switch {
	case !found:
		v.self = -1
	case before == 0:
		v.nodes, v.self, v.holds = []NodeName{me}, 0, true
	default:
		// Second in the queue, watching the first: skipCandidate's
		// condition, which FirstHolds meets on the listing without it.
		v.nodes, v.self, v.watch = []NodeName{pred, me}, 1, []int{0}
		v.skip = before == 1 && q.contract.grantsLowest
	}
	return v, true, nil
}
