package zookeeper

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
)

// The sequence limit (docs/design.md#the-sequence-limit).
//
// A sequential node's suffix is its directory's child-change counter, a
// signed 32-bit number. ZooKeeper 3.4 wrapped it past 2147483647 to
// -2147483648. ZooKeeper 3.5 and later stop it at 2147483647: the server only
// ever raises the stored counter, so every later create in the directory is
// given 2147483647 again, and a create pipelined behind another one in
// flight is given the overflowed -2147483648, -2147483647, ... of the
// pending change. Past that point the suffix says nothing about which node
// came first, and ordering by it grants a newcomer ahead of a live holder.
//
// The rule: a node whose position is 2147483647 or negative is past the
// limit. Every node that is not was created before every node that is (on
// 3.5+ the counter never goes back below the limit; on 3.4 a node would have
// to outlive 2^31 further creates), and among themselves nodes past the
// limit are ordered by creation: their czxid, the zxid of the transaction
// that created them, which the server assigns in one total order. A listing
// with no node past the limit keeps the sequence order, at no cost.

// pastLimit reports whether a sequence may have been assigned at or past
// the counter's limit, where it no longer tells the creation order.
func pastLimit(seq int32) bool { return seq == math.MaxInt32 || seq < 0 }

// seqWarnMargin is how close to the limit a created node's sequence must
// be for the Session to warn (about 6% of the counter's range: hours at
// ten thousand acquisitions a second, each a create and a delete).
const seqWarnMargin = 1 << 27

// ErrSequenceLimit is matched by the error of an acquisition that cannot be
// ordered because its directory's sequence counter is at its limit
// (2147483647; docs/design.md#the-sequence-limit) and a node in it is, or
// would be, anchored past the limit: RWMutex.Downgrade (AcquireAnchored)
// there, or a listing holding such a node written by an older version.
// Nothing is granted and the caller's node is deleted; every other
// acquisition there is ordered by creation and goes on. The counter starts
// again at 0 only in a new directory: let it empty (a container the recipes
// created is then removed), delete a persistent one, or use a new path.
var ErrSequenceLimit error = &labeled{"recipe: the directory's sequence counter is at its limit", "sequence_limit"}

// labeled is a sentinel error of this package that names its metrics
// reason, so that a metrics adapter (recipe/prommetrics) can label it without
// importing this package and, with it, a ZooKeeper client.
type labeled struct{ msg, reason string }

func (e *labeled) Error() string { return e.msg }

// MetricReason is the label of the error in metrics ("sequence_limit").
func (e *labeled) MetricReason() string { return e.reason }

// SequenceMetrics is an optional extension of recipe.Metrics: a recipe.Metrics that also
// implements it is told the headroom of the sequence counter of a queue
// directory after each node this Session creates there.
type SequenceMetrics interface {
	// SequenceHeadroom is called after a create in dir, on the creating
	// goroutine, with how many more sequences the directory's counter can
	// give before its limit (2147483647 minus the node's sequence), or 0
	// once it is at or past the limit (the node's sequence is 2147483647
	// or negative): from then on the directory's nodes are ordered by
	// creation, one read per node per wakeup. Operators alert on a small
	// value (prommetrics exports it as zkrecipes_sequence_headroom).
	SequenceHeadroom(kind, dir string, remaining int64)
}

// noteSeq reports the sequence of a node this Session created in q's
// directory: the headroom to SequenceMetrics, and a WARN log once per
// directory and Session when it comes within seqWarnMargin of the limit.
func (q *qdir) noteSeq(kind string, seq int32) {
	remaining := int64(math.MaxInt32) - int64(seq)
	if pastLimit(seq) {
		remaining = 0
	}
	if m, ok := q.s.cfg.metrics.(SequenceMetrics); ok {
		m.SequenceHeadroom(metricKind(kind), q.dir, remaining)
	}
	if remaining < seqWarnMargin {
		q.s.limits.warn(q, remaining)
	}
}

// limitRemedy is what the WARNs tell an operator to do.
const limitRemedy = "the counter starts again at 0 only in a new directory: let it empty (a container the recipes created is then removed by the server) or delete a persistent one, or use a new path"

// limitWarnings remembers the directories a Session has warned about, so
// that each is logged once per Session (and once more when it reaches the
// limit after a near-limit warning).
type limitWarnings struct {
	mu     sync.Mutex
	warned map[string]bool // dir → reached
}

func (w *limitWarnings) warn(q *qdir, remaining int64) {
	reached := remaining == 0
	w.mu.Lock()
	was, seen := w.warned[q.dir]
	if seen && (was || !reached) {
		w.mu.Unlock()
		return
	}
	if w.warned == nil {
		w.warned = map[string]bool{}
	}
	w.warned[q.dir] = reached
	w.mu.Unlock()
	if reached {
		q.s.log.Warn("sequence counter at its limit: ordering the directory's nodes by creation, one read per node per wakeup; "+limitRemedy,
			"dir", shortpath.Of(q.dir))
		return
	}
	q.s.log.Warn("sequence counter near its limit; "+limitRemedy, "dir", shortpath.Of(q.dir), "remaining", remaining)
}

// order puts a parsed listing (parseListing's sequence order) in queue
// order. With a node past the limit it reads the czxid of every such node
// (cache, when not nil, keeps them across the calls of one wait: a node's
// czxid never changes) and sorts by compareCreation; nodes found gone are
// left out, as a later listing would. A node anchored to a position past
// the limit cannot be placed: ErrSequenceLimit.
func (q *qdir) order(ctx context.Context, nodes []NodeName, cache map[string]int64) ([]NodeName, error) {
	if !slices.ContainsFunc(nodes, func(n NodeName) bool { return pastLimit(n.Seq) || pastLimit(n.pos()) }) {
		return nodes, nil
	}
	for _, n := range nodes {
		if n.Anchored && pastLimit(n.Anchor) {
			return nil, fmt.Errorf("%w: %s holds %s, anchored to a position past it", ErrSequenceLimit, shortpath.Of(q.dir), n.Name)
		}
	}
	q.s.limits.warn(q, 0)
	if err := q.readCzxids(ctx, nodes, cache); err != nil {
		return nil, err
	}
	nodes = slices.DeleteFunc(nodes, func(n NodeName) bool { return n.czxid < 0 })
	slices.SortFunc(nodes, compareCreation)
	return nodes, nil
}

// readCzxids sets the czxid of every node whose sequence is past the limit:
// as already set (Participants reads it with the node), from cache, or
// read (readEach: the reads go out together, so a wakeup pays a round trip
// per maxNodeReads nodes). A node found gone gets czxid -1.
func (q *qdir) readCzxids(ctx context.Context, nodes []NodeName, cache map[string]int64) error {
	var need []int
	for i := range nodes {
		if !pastLimit(nodes[i].Seq) || nodes[i].czxid != 0 {
			continue
		}
		if z, ok := cache[nodes[i].Name]; ok {
			nodes[i].czxid = z
			continue
		}
		need = append(need, i)
	}
	got := make([]int64, len(need))
	err := readEach(ctx, len(need), maxNodeReads, func(j int) error {
		var ok bool
		var st *zk.Stat
		err := q.s.req.retry(ctx, q.reqSize, func() (err error) {
			ok, st, err = q.s.conn.Exists(q.adir + "/" + nodes[need[j]].Name)
			return err
		})
		switch {
		case err != nil:
			return q.wrap("exists", err)
		case !ok:
			got[j] = -1
		default:
			got[j] = st.Czxid
		}
		return nil
	})
	if err != nil {
		return err
	}
	for j, i := range need {
		nodes[i].czxid = got[j]
		if cache != nil && got[j] >= 0 {
			cache[nodes[i].Name] = got[j]
		}
	}
	return nil
}

// compareCreation is the queue order at the limit: nodes whose position is
// before the limit first, in sequence order (compareNodes; anchored
// siblings by czxid where both are known), then the nodes whose position is
// past it by czxid. A node anchored past the limit is never compared (order
// refuses the listing).
func compareCreation(x, y NodeName) int {
	xl, yl := pastLimit(x.pos()), pastLimit(y.pos())
	switch {
	case xl && yl:
		return cmp.Compare(x.czxid, y.czxid)
	case xl:
		return 1
	case yl:
		return -1
	}
	if x.pos() == y.pos() && x.Anchored && y.Anchored && x.czxid > 0 && y.czxid > 0 {
		return cmp.Compare(x.czxid, y.czxid)
	}
	return compareNodes(x, y)
}
