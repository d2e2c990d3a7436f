package cache

import (
	"slices"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Changes are applied in the order of the events that caused them, not in
// the order their replies came: with one-shot watches a node's creation is
// read a round trip after the event behind it (a child watch fires, the
// listing shows the node, then its read), while a deletion that happened
// later is read in one; applied as they came, the deletion would be
// reported first. Each request carries the cause it serves (the event, or
// the connection's load, that made it be sent; requests a reply makes
// inherit its cause), and a change found by a reply waits until no
// request of an earlier cause is outstanding.

// effect is one change a reply found.
type effect struct {
	cause uint64
	node  recipe.Node // to put, unless del
	del   string      // the path to remove, with what is held below it
	rev   int64
}

// ordering holds the changes that wait.
type ordering struct {
	seq    uint64         // the last cause given
	counts map[uint64]int // requests outstanding, by cause
	low    uint64         // no request of a cause below it is outstanding
	held   []effect       // sorted by cause, then by arrival
}

// reset forgets the outstanding requests and the changes that wait (a
// connection ended: its reads are done again) and returns a new cause.
func (o *ordering) reset() uint64 {
	o.counts, o.held = make(map[uint64]int), nil
	o.seq++
	o.low = o.seq
	return o.seq
}

// next returns a new cause.
func (o *ordering) next() uint64 {
	o.seq++
	return o.seq
}

func (o *ordering) sent(cause uint64) { o.counts[cause]++ }

func (o *ordering) answered(cause uint64) {
	if o.counts[cause]--; o.counts[cause] <= 0 {
		delete(o.counts, cause)
	}
}

// hold queues e behind the changes of earlier causes.
func (o *ordering) hold(e effect) {
	i, _ := slices.BinarySearchFunc(o.held, e.cause+1, func(h effect, c uint64) int {
		if h.cause < c {
			return -1
		}
		return 1
	})
	o.held = slices.Insert(o.held, i, e)
}

// ready takes the changes no outstanding request comes before.
func (o *ordering) ready() []effect {
	for o.low <= o.seq && o.counts[o.low] == 0 {
		o.low++
	}
	n := 0
	for n < len(o.held) && o.held[n].cause <= o.low {
		n++
	}
	out := o.held[:n:n]
	o.held = o.held[n:]
	return out
}

// pending reports whether a request is outstanding or a change waits.
func (o *ordering) pending() bool { return len(o.counts) > 0 || len(o.held) > 0 }
