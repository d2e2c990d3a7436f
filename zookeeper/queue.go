package zookeeper

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The package, by file. The queue engine:
//
//	queue.go    Queue, Rule and its declared contract, Acquire and its variants,
//	            the lock-delay's step after the wait
//	qdir.go     qdir: the queue's directory, the part that owns its
//	            creates, reads and deletes (every file below but wait.go)
//	join.go     joining: the node's create, the session that owns it
//	create.go   the protected create: a lost reply, a caller who left
//	dirs.go     the queue directory and its parents, created when missing
//	wait.go     waiter, the core loop: list, ask the Rule, grant or watch, wake,
//	            list again
//	verdict.go  the Rule's answer on a listing; FirstHolds in one pass
//	dirrule.go  RuleFromDirData: a Rule kept in the directory's data
//	fast.go     the fast paths of the create and the grant: create2 token,
//	            pipelined listing, child-watch stand-in
//	wake.go     the fast paths of the wakeup: re-list skip, own-node read
//	            beside the listing, prefetch from the event callback
//	ticket.go   Ticket: a node that keeps its place across grants
//	observe.go  reading a queue from outside: Participants, Head, ObserveHead
//	name.go     NodeName, on internal/zkname's grammar; the queue order
//	limit.go    the order once a directory's sequence counter is at its limit
//	packet.go   the packet limit: request sizes
//	lease.go    lease: a grant (grant.Core), its Release
//	lockdelay.go lockDelay, the lock-delay of an exclusive lock: its marker znode
//
// The Session, a front over its parts (all under one lock, log.go):
//
//	session.go  Session: Connect, Close, events, Listen
//	options.go  Option, SuspendPolicy, config;  metrics.go  WithMetrics
//	dial.go     Connect's attempts, default port; path.go  paths, server lists
//	state.go    connState: states, epochs, transitions
//	deadline.go the ownership deadlines (grant.Deadline)
//	registry.go leaseRegistry: generations, leases, activation, revocation
//	slots.go    child slots and own-node watches
//	watch.go    watchRegistry: watches shared by waiters
//	cleanup.go  cleaner: owned deletes left to retry, the janitor
//	delete.go   the owned deletes (by version, checked, by GUID)
//	call.go     requests: one attempt or retries (connection errors, lost sends,
//	            the wait for a connection), on pool.go's workers
//	wire.go     wireState: what zkwire reads off the connection
//	log.go      sessionLock, and what is logged after it
//	errors.go   PathError, the package's error helpers
//	side.go     the doors internal/zkside opens to the module's other packages
//
// See docs/design.md#acquisition for the ZooKeeper operations of an
// acquisition, a release and a cancel.

// Rule is a recipe's whole policy on top of the queue engine: given the
// listing of a queue directory in queue order and the index of the caller's
// node, it says whether that node holds and, if not, the indexes of the
// nodes whose deletion could change the answer (at least one; not self): a
// mutex holds at index 0 and watches self-1. A Rule must be a pure, cheap
// function of the names (no I/O, data or time); a "wait" must stay "wait"
// while every watched node exists; a node it grants must stay granted on
// every later listing that shows it. Anything more is declared with
// QueueOptions. A Rule that panics fails the call that asked it with an
// error matching recipe.ErrBadOption (docs/design.md#the-rule-contract).
type Rule func(nodes []NodeName, self int) (holds bool, watch []int)

// FirstHolds is the Rule of an exclusive lock: the lowest node holds; every
// other node watches its immediate predecessor. It grants the lowest node
// (declare GrantsLowest).
func FirstHolds(_ []NodeName, self int) (bool, []int) {
	if self == 0 {
		return true, nil
	}
	return false, []int{self - 1}
}

// QueueOption declares to NewQueue a property of the queue's Rule that the
// engine may rely on. Without options the engine assumes only what Rule
// states. See docs/design.md#the-rule-contract.
type QueueOption func(*ruleContract)

// GrantsLowest declares that the Rule grants the lowest node of every
// listing, whatever nodes follow it (FirstHolds, a semaphore's rule). With
// it, and without AllowsAnchors, a waiter whose only predecessor was
// deleted is granted on a read of its own node instead of a new listing.
// See docs/design.md#waking-and-the-re-list-skip.
func GrantsLowest() QueueOption { return func(c *ruleContract) { c.grantsLowest = true } }

// AllowsAnchors declares that a node may take the queue position of an
// earlier node (AcquireAnchored) of one of anchorKinds (all the queue's
// kinds when none are given), and that the Rule lets an anchored node hold
// while its anchor is ahead of it (the read-write lock's read rule). A
// queue without it refuses AcquireAnchored, and its requests are sized
// without room for anchored names (WithMaxPacket).
func AllowsAnchors(anchorKinds ...string) QueueOption {
	return func(c *ruleContract) {
		c.anchors = true
		c.anchorKinds = append(c.anchorKinds, anchorKinds...)
	}
}

// ruleContract is a queue's Rule and what the engine may assume of it; dir
// and log name the queue in the errors and logs of a Rule that misbehaves.
type ruleContract struct {
	rule         Rule
	dir          string
	log          *slog.Logger
	grantsLowest bool     // the lowest node holds whatever follows it
	firstHolds   bool     // rule is FirstHolds: decided in one pass (firstPass)
	anchors      bool     // anchored nodes may appear in the queue
	anchorKinds  []string // the kinds of the nodes that may be anchors
	fromDir      *dirRule // RuleFromDirData: the Rule is the directory data's (dirrule.go)
}

// MaxNodeData is the most data a queue node may carry, in bytes: a
// participant's data is read by every Participants call and by observers
// of the queue head, so it is meant to be small (a host name, an address).
// The create that carries it must also fit the session's packet limit
// (WithMaxPacket) together with the node's path: data over MaxNodeData, or
// too large for the packet limit with the path, is refused before anything
// is sent (recipe.ErrTooLarge; recipe.ErrBadOption too over MaxNodeData).
const MaxNodeData = 512 << 10

// Queue is the ephemeral-sequential queue engine every ZooKeeper recipe of
// this module drives (the shape of Curator's LockInternals), and the way to
// write a custom recipe: the recipe supplies node kinds and a Rule (with the
// QueueOptions it satisfies); the engine creates, waits, watches, retries
// and cleans up. Whatever the Rule: one ephemeral sequential znode per
// Acquire, named with a fresh GUID and adopted after a lost create reply
// only if the current session owns it; a waiter watches only the nodes the
// Rule names; foreign children are ignored; an error leaves no node; a grant
// is made only on the node's Stat (owner checked, czxid the token) with its
// watch set no later than the state decided on (docs/design.md#acquisition).
type Queue struct {
	queueDoor                            // what internal/zkside lends the module's recipes (side.go)
	d         qdir                       // its directory: creates, reads, deletes (qdir.go)
	contract  ruleContract               // its Rule and what the Rule declares
	reps      map[string]*grant.Reporter // where its leases' losses are reported, by kind
	// solo: the last Acquire's pipelined listing showed its node alone and
	// granted it (a hint for the child-watch stand-in: see fast.go).
	solo  atomic.Bool
	delay *lockDelay // the lock-delay of an exclusive lock, nil without one (lockdelay.go)
}

// NewQueue returns a queue engine over directory dir (an absolute path, not
// the root, with no trailing slash, no empty, "." or ".." segment, no
// character ZooKeeper refuses, valid UTF-8, outside /zookeeper, no segment
// named like a queue node: see the package doc's Paths) whose nodes are of
// the given kinds (e.g. "lock-"; non-empty, no "/" or "@"), deciding grants
// with rule under opts, without any ZooKeeper operation. Errors:
// recipe.ErrInvalidPath (with ErrReservedName for a segment named like a
// queue node or "_lock-delay"; with recipe.ErrTooLarge for a path too long
// for the packet limit: see WithMaxPacket), recipe.ErrBadOption,
// recipe.ErrSessionClosed (s already closed).
func NewQueue(s *Session, dir string, kinds []string, rule Rule, opts ...QueueOption) (*Queue, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil session", recipe.ErrBadOption)
	}
	if s.isClosed() {
		return nil, recipe.ErrSessionClosed
	}
	if err := validatePath(dir); err != nil {
		return nil, err
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("%w: a queue needs node kinds", recipe.ErrBadOption)
	}
	for _, k := range kinds {
		if k == "" || strings.ContainsAny(k, "/@\x00") {
			return nil, fmt.Errorf("%w: node kind %q", recipe.ErrBadOption, k)
		}
	}
	q := &Queue{d: qdir{s: s, dir: dir, adir: s.abs(dir), kinds: slices.Clone(kinds)},
		contract: ruleContract{rule: rule, firstHolds: isFirstHolds(rule), dir: dir, log: s.log}, reps: make(map[string]*grant.Reporter, len(kinds))}
	q.queueDoor = zkside.NewQueueDoor[Head]((*queueSide)(q))
	for _, k := range q.d.kinds {
		q.reps[k] = &grant.Reporter{Log: s.mu.leaseLog, Metrics: s.cfg.metrics, Backend: "zookeeper", Kind: metricKind(k), Dir: dir}
	}
	for _, o := range opts {
		if o != nil {
			o(&q.contract)
		}
	}
	if c := &q.contract; c.rule == nil && c.fromDir == nil {
		return nil, fmt.Errorf("%w: a queue needs a rule (or RuleFromDirData)", recipe.ErrBadOption)
	}
	if c := &q.contract; c.anchors && len(c.anchorKinds) == 0 {
		c.anchorKinds = q.d.kinds
	}
	if err := s.limit.checkQueueDir(dir, q.d.adir, q.d.kinds, q.contract.anchors); err != nil {
		return nil, err
	}
	q.d.reqSize = s.limit.queueRequestSize(q.d.adir, q.d.kinds, q.contract.anchors)
	for _, k := range q.contract.anchorKinds {
		if !slices.Contains(q.d.kinds, k) {
			return nil, fmt.Errorf("%w: anchor kind %q is not one of %q", recipe.ErrBadOption, k, q.d.kinds)
		}
	}
	return q, nil
}

// Acquire joins the queue with a node of kind carrying data and blocks until
// the Rule grants it, ctx ends, or the grant becomes impossible; a SUSPENDED
// connection is waited out (the node keeps its place; no grant meanwhile).
// Errors: ctx's cause; recipe.ErrSessionLost; recipe.ErrNodeDeleted (by
// someone else); recipe.ErrSessionClosed; recipe.ErrMixedRecipes;
// ErrSequenceLimit (an old version's anchored node past the limit queued);
// an *recipe.OpError for refusals (recipe.ErrNoPermission for ACLs);
// recipe.ErrBadOption (unknown kind); recipe.ErrTooLarge (data over
// MaxNodeData, with ErrBadOption, or over the packet limit). An error leaves
// no node while the server answers (docs/design.md#acquisition).
func (q *Queue) Acquire(ctx context.Context, kind string, data []byte) (recipe.Lease, error) {
	return q.acquire(ctx, kind, data, true, nil)
}

// TryAcquire is Acquire without waiting: if the Rule does not grant the new
// node on the first listing, the node is deleted and the error matches
// recipe.ErrLocked. Its own-node watch is set only when it is granted. A "not
// acquired" answer leaves no node, also across a connection blip (the
// delete is retried, then handed to the cleaner). It does not wait for a
// holder, but like every request it waits for a connection while no server
// answers: give ctx a deadline.
func (q *Queue) TryAcquire(ctx context.Context, kind string, data []byte) (recipe.Lease, error) {
	return q.acquire(ctx, kind, data, false, nil)
}

// AcquireAnchored is Acquire for a node that takes the queue position of
// anchor: a live lease of a Queue on the same directory and Session, of an
// anchor kind (AllowsAnchors) and not itself anchored (the read-write lock's
// downgrade). The node is created in one multi with a check that the
// anchor's node exists, so its position was never given to anyone else, and
// the grant carries the anchor's token. Errors: as Acquire; ErrBadOption
// when the queue is not AllowsAnchors or anchor is not such a lease;
// recipe.ErrLeaseLost (wrapping the cause) when anchor has ended or its node
// is gone; ErrSequenceLimit when the anchor's sequence is at or past the
// counter's limit (nothing is created, anchor is still held).
func (q *Queue) AcquireAnchored(ctx context.Context, kind string, data []byte, anchor recipe.Lease) (recipe.Lease, error) {
	c := q.contract
	if !c.anchors {
		return nil, fmt.Errorf("%w: anchored nodes need a queue declared with AllowsAnchors (%s)", recipe.ErrBadOption, shortpath.Of(q.d.dir))
	}
	var l *lease
	if a, ok := anchor.(queueLease); ok {
		l = a.queueNode()
	}
	if l == nil || l.reg != &q.d.s.leases || path.Dir(l.path) != q.d.adir {
		return nil, fmt.Errorf("%w: the anchor must be a lease of %s on the same session", recipe.ErrBadOption, shortpath.Of(q.d.dir))
	}
	n, ok := parseNodeName(path.Base(l.path), c.anchorKinds)
	if !ok || n.Anchored {
		return nil, fmt.Errorf("%w: the anchor must be a node of kind %q of %s, not %s", recipe.ErrBadOption, c.anchorKinds, shortpath.Of(q.d.dir), path.Base(l.path))
	}
	if lctx := l.Context(); lctx.Err() != nil {
		return nil, errorf("%w (%w)", recipe.ErrLeaseLost, context.Cause(lctx))
	}
	if pastLimit(n.Seq) {
		// Its position could not be placed in the creation order (see order).
		return nil, fmt.Errorf("%w: %s: the anchor %s is past it", ErrSequenceLimit, shortpath.Of(q.d.dir), path.Base(l.path))
	}
	return q.acquire(ctx, kind, data, true, &anchorSpec{path: l.path, seq: n.Seq, token: int64(l.Token())})
}

// queueLease is a recipe.Lease granted by a Queue of this package: the leases
// AcquireAnchored accepts as anchors.
type queueLease interface {
	recipe.Lease
	queueNode() *lease // nil for a nil *lease
}

func (l *lease) queueNode() *lease { return l }

type anchorSpec struct {
	path  string // absolute
	seq   int32  // the position taken
	token int64  // the anchor's token, which the anchored grant carries
}

// acquire is the whole of Acquire, TryAcquire and AcquireAnchored, with
// their metrics: join and wait, then, for a lock with a lock-delay, the
// delay's step. A grant that a suspension ended while it served the
// delay was never handed out: its node is given up, and a wait joins
// again, as a wait outlives a suspension (rejoin; the rest of the delay
// counts from the marker's stamp). One grant.Serving adds up the delay
// waited across those joins.
func (q *Queue) acquire(ctx context.Context, kind string, data []byte, wait bool, anchor *anchorSpec) (recipe.Lease, error) {
	a := grant.Begin(q.d.s.cfg.metrics, metricKind(kind), q.d.dir)
	var w *grant.Serving
	if q.delay != nil {
		// Its log line goes to the Session's logger: the lease's reports
		// (leaseLog) are made under the Session's lock and held until it
		// is released, and this wait is not under it (a data race, found
		// by the race detector in a CLI child on a loaded machine).
		rep := *q.reps[kind]
		rep.Log = q.d.s.log
		w = grant.NewServing(&rep, q.delay.d)
	}
	for {
		t, l, err := q.joinAndWait(ctx, kind, data, wait, anchor)
		if err == nil && q.delay != nil {
			if err = q.delay.hold(ctx, t, l, wait, w); err != nil {
				l.end() // not handed out: given up like a wait that failed
			}
		}
		if err != nil && t != nil {
			t.abandon(ctx) // the node of a failed wait or delay goes
			if q.delay.rejoin(ctx, wait, err) {
				continue
			}
		}
		if err != nil {
			a.Done(nil, err)
			return nil, err
		}
		a.Done(l, nil)
		return l, nil
	}
}

// joinAndWait joins and waits: t is nil when the join failed (nothing is
// left behind then); after a failed wait the caller gives t's node up.
func (q *Queue) joinAndWait(ctx context.Context, kind string, data []byte, wait bool, anchor *anchorSpec) (*Ticket, *lease, error) {
	fs := q.fastStartFor(wait, anchor)
	t, err := q.join(ctx, kind, data, anchor, false, fs)
	if err != nil {
		return nil, nil, err
	}
	l, err := t.await(ctx, wait, fs)
	return t, l, err
}

// Drain waits until no create sent by this Queue is still in flight and
// every delete of a node this Queue gave up (a failed or cancelled Acquire,
// Ticket.Leave, a create that landed after its caller stopped waiting) is
// finished: the node is deleted, found gone, or went with its session. A
// delete waiting for a reconnection keeps Drain waiting until it is done
// or ctx ends. A recipe's Close calls it so that no node of its exists
// after Close returns (case C12). Errors: ctx's cause.
func (q *Queue) Drain(ctx context.Context) error {
	return q.d.pending.wait(ctx)
}
