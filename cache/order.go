package cache

import (
	"path"
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
//
// A change released late is reported at the newest zxid applied, which
// may be later than its read's: that is true only if the node did not
// change in between. If it did, its event came before the reply that
// moved the zxid there, so a read of that node is outstanding or its
// change waits: then the older change is dropped (the newer one follows).

// effect is one change a reply found.
type effect struct {
	cause uint64
	node  recipe.Node // to put, unless del
	del   string      // the path to remove, with what is held below it
	rev   int64
}

// path is the node e changes.
func (e effect) path() string {
	if e.del != "" {
		return e.del
	}
	return e.node.Path
}

// ordering holds the changes that wait.
type ordering struct {
	seq    uint64         // the last cause given
	counts map[uint64]int // requests outstanding, by cause
	low    uint64         // no request of a cause below it is outstanding
	held   []effect       // sorted by cause, then by arrival
	// paths counts, per node, the reads of its data outstanding and its
	// changes that wait.
	paths map[string]int
}

// reset forgets the outstanding requests and the changes that wait (a
// connection ended: its reads are done again) and returns a new cause.
func (o *ordering) reset() uint64 {
	o.counts, o.held, o.paths = make(map[uint64]int), nil, make(map[string]int)
	o.seq++
	o.low = o.seq
	return o.seq
}

// next returns a new cause.
func (o *ordering) next() uint64 {
	o.seq++
	return o.seq
}

// sent counts a request of cause; key (pendingKey's) names what it reads,
// "" if nothing a change waits on.
func (o *ordering) sent(cause uint64, key string) {
	o.counts[cause]++
	if key != "" {
		o.paths[key]++
	}
}

// answered counts the reply to a request sent so.
func (o *ordering) answered(cause uint64, key string) {
	if o.counts[cause]--; o.counts[cause] <= 0 {
		delete(o.counts, cause)
	}
	if key != "" {
		o.unpend(key)
	}
}

// pendingKey is what a read of path's data (path itself) or of its
// children (path and a NUL, which no path holds) is counted under.
func pendingKey(path string, children bool) string {
	if children {
		return path + "\x00"
	}
	return path
}

func (o *ordering) unpend(path string) {
	if o.paths[path]--; o.paths[path] <= 0 {
		delete(o.paths, path)
	}
}

// release counts e, which ready returned, as applied now, and reports
// whether it is stale: a read of its node is outstanding, or a later change
// of it waits (held, or after it among those ready returned).
//
// A deletion is stale too while its parent's listing is outstanding: with
// one-shot watches a node made again is known from that listing only (the
// parent's child watch fires; the node's own watch went with its delete).
func (o *ordering) release(e effect) (stale bool) {
	p := e.path()
	o.unpend(p)
	return o.paths[p] > 0 || e.del != "" && o.paths[pendingKey(path.Dir(p), true)] > 0
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
	o.paths[e.path()]++
}

// ready takes the changes no outstanding request comes before; each is
// then released, in order.
func (o *ordering) ready() []effect {
	for o.low <= o.seq && o.counts[o.low] == 0 {
		o.low++
	}
	n := 0
	for n < len(o.held) && o.held[n].cause <= o.low {
		n++
	}
	out := o.held[:n:n]
	if o.held = o.held[n:]; len(o.held) == 0 {
		o.held = nil // not the array's end: the array would stay
	}
	return out
}

// shrink makes anew the maps and the array a large load grew, once
// nothing is pending.
func (o *ordering) shrink() {
	o.paths, o.held = make(map[string]int), nil
}

// pending reports whether a request is outstanding or a change waits.
func (o *ordering) pending() bool { return len(o.counts) > 0 || len(o.held) > 0 }
