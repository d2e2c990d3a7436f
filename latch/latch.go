package latch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/notify"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Kind is the node kind of latch znodes: their names are
// "_c_<guid>-latch-<sequence>".
const Kind = "latch-"

// Errors of this package. Each matches with errors.Is.
var (
	// ErrClosed is returned by Start and Await once Close was called, and is
	// the Cause of the final Change a listener receives from Close.
	ErrClosed = errors.New("latch: closed")

	// ErrAlreadyStarted is returned by Start when the latch was already
	// started (or a Start is in progress).
	ErrAlreadyStarted = errors.New("latch: already started")

	// ErrNotStarted is returned by Await when Start has not been called (or
	// every Start so far failed).
	ErrNotStarted = errors.New("latch: not started")

	// ErrNoLeader is returned by Leader when the election has no
	// participant (an empty or missing directory).
	ErrNoLeader = errors.New("latch: no leader")
)

// Change is one change of this participant's leadership, as delivered by
// Listen.
type Change struct {
	// Leader is true when this participant became leader, false when it
	// stopped being leader (or, for the final Change, never was).
	Leader bool
	// Token is the fencing token of the grant that began (Leader true) or
	// ended (Leader false; zero if there was none).
	Token fence.Token
	// Lease is the grant that began, as Await returns it (nil when Leader is
	// false). Its Context may already be done when a slow reader gets it.
	Lease recipe.Lease
	// At is when the latch observed the change (for the current grant
	// delivered first by Listen: when it was granted).
	At time.Time
	// Cause says why leadership ended (nil when Leader is true):
	// recipe.ErrSuspended, recipe.ErrSessionLost, recipe.ErrNodeDeleted,
	// recipe.ErrSessionClosed, ErrClosed for the final Change of Close, or
	// for the final Change of a participant that stopped on an error
	// retrying cannot cure, that error (see Await).
	Cause error
}

// Option configures New.
type Option func(*Latch)

// WithLogger sets the logger for the participant's re-joins and retries
// (default: the Session's logger, zookeeper.Session.Logger).
func WithLogger(l *slog.Logger) Option {
	return func(x *Latch) {
		if l != nil {
			x.log = l
		}
	}
}

type phase int

const (
	phaseNew      phase = iota // not started (or every Start failed)
	phaseStarting              // Start is joining
	phaseRunning               // the participant loop runs
	phaseEnded                 // the loop ended: Close, or the session closed
)

// Latch is one participant of a leader election under a directory, with
// Curator's LeaderLatch semantics (see the package documentation). Create
// it with New, join with Start, leave for good with Close. All methods are
// safe for concurrent use.
type Latch struct {
	q    *zookeeper.Queue
	id   string
	data []byte
	log  *slog.Logger

	ctx    context.Context // ends at Close: stops Start's join and the loop
	cancel context.CancelCauseFunc

	mu        sync.Mutex
	phase     phase
	closed    bool          // Close was called
	endErr    error         // why the loop ended (phaseEnded)
	done      chan struct{} // closed when the current Start/loop is over; nil before Start
	ticket    *zookeeper.Ticket
	cur       *grant           // the current grant, nil when not leader
	changed   notify.Broadcast // at every change of state
	listeners notify.Listeners[Change]
}

// New returns a participant with the given id in the election under the
// directory path (relative to the session's chroot) on session s. The id is
// stored as the data of the participant's znode, where Participants and
// Leader show it; it need not be unique, but it is what operators see.
// New performs no ZooKeeper operation; Start joins.
//
// Errors: a *zookeeper.PathError (matching recipe.ErrInvalidPath) for an
// invalid path (also, matching recipe.ErrTooLarge, for one too long for the
// session's packet limit); recipe.ErrBadOption for a nil session or an id
// over zookeeper.MaxNodeData bytes; recipe.ErrTooLarge for an id over that or
// too large for the packet limit with the path; recipe.ErrSessionClosed
// when s is closed.
func New(s *zookeeper.Session, path string, id string, opts ...Option) (*Latch, error) {
	q, err := zookeeper.NewQueue(s, path, []string{Kind}, zookeeper.FirstHolds)
	if err != nil {
		return nil, err
	}
	if err := q.CheckNodeData([]byte(id)); err != nil {
		return nil, fmt.Errorf("latch id: %w", err)
	}
	l := &Latch{
		q:    q,
		id:   id,
		data: []byte(id),
		log:  s.Logger(),
	}
	for _, o := range opts {
		if o != nil {
			o(l)
		}
	}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	return l, nil
}

// ID returns the participant's id.
func (l *Latch) ID() string { return l.id }

// Path returns the election directory (relative to the session's chroot).
func (l *Latch) Path() string { return l.q.Dir() }

// Start joins the election: it creates the participant's znode (ephemeral
// sequential, protected name, data: the id; plus container znodes for a
// missing directory and its parents) and returns once the node exists, then
// runs the participant in one goroutine of its own until Close, until the
// session is closed, or until an error that retrying cannot cure (see
// Await). It does not wait for leadership: use Await or Listen. The
// participant's ZooKeeper operations are those of zookeeper.Queue.Join and
// zookeeper.Ticket.Await (docs/design.md#acquisition): a mutex waiter's
// without its fast paths, the node keeping its place across suspensions.
//
// Errors: ErrAlreadyStarted; ErrClosed (Close was called, also while Start
// was joining: the node is then deleted); ctx's cause when ctx ends before
// the node exists (nothing is left behind); recipe.ErrSessionClosed; an
// *recipe.OpError for refusals (matching recipe.ErrNoPermission for ACLs).
// After an error other than ErrAlreadyStarted and ErrClosed, Start may be
// called again.
func (l *Latch) Start(ctx context.Context) error {
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return ErrClosed
	case l.phase != phaseNew:
		l.mu.Unlock()
		return ErrAlreadyStarted
	}
	l.phase = phaseStarting
	done := make(chan struct{})
	l.done = done
	l.changed.Notify()
	l.mu.Unlock()

	// The join ends when ctx ends or Close is called.
	jctx, jcancel := context.WithCancelCause(ctx)
	defer jcancel(nil)
	defer context.AfterFunc(l.ctx, func() { jcancel(ErrClosed) })()
	t, err := l.q.Join(jctx, Kind, l.data)

	l.mu.Lock()
	if l.closed {
		// Close runs and waits for done: leave now, so the node is gone
		// before Close deals with in-flight creates.
		l.phase = phaseEnded
		l.endErr = ErrClosed
		l.mu.Unlock()
		if t != nil {
			if lerr := t.Leave(context.Background()); lerr != nil {
				l.mu.Lock()
				l.ticket = t // Close retries
				l.mu.Unlock()
			}
		}
		close(done)
		return ErrClosed
	}
	if err != nil {
		l.phase = phaseNew
		l.done = nil
		l.changed.Notify()
		l.mu.Unlock()
		close(done)
		return err
	}
	l.phase = phaseRunning
	l.ticket = t
	l.changed.Notify()
	l.mu.Unlock()
	go l.run(t, done)
	return nil
}

// IsLeader reports whether this participant is the leader now: it holds a
// grant whose context is not done. It performs no ZooKeeper operation and
// never blocks on the network.
func (l *Latch) IsLeader() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.closed && l.cur != nil && l.cur.inner.Context().Err() == nil
}

// Await blocks until this participant is the leader and returns the grant:
// a recipe.Lease whose Token is the czxid of the participant's node, whose
// Context ends when this leadership ends (context.Cause says why), and
// whose Release closes the latch: Release is Close (leadership is given up
// for good, the node deleted, listeners told), and returns
// recipe.ErrLeaseLost (wrapping the cause) when this leadership had already
// ended before Release, after closing the latch all the same. If the
// participant leads when Await is called, Await returns the current grant at
// once; after a suspension that healed it returns a new grant with the same
// token. Await performs no ZooKeeper operation itself.
//
// Errors: ctx's cause; ErrNotStarted (before Start, or after a failed Start);
// ErrClosed; recipe.ErrSessionClosed when the latch ended with its session;
// the error that ended the participant when retrying could not cure it
// (recipe.Permanent: recipe.ErrMixedRecipes when the directory holds
// another recipe's nodes, recipe.ErrNoPermission, ...).
func (l *Latch) Await(ctx context.Context) (recipe.Lease, error) {
	for {
		l.mu.Lock()
		switch {
		case l.closed:
			l.mu.Unlock()
			return nil, ErrClosed
		case l.phase == phaseNew:
			l.mu.Unlock()
			return nil, ErrNotStarted
		case l.phase == phaseEnded:
			err := l.endErr
			l.mu.Unlock()
			return nil, err
		}
		if g := l.cur; g != nil && g.inner.Context().Err() == nil {
			l.mu.Unlock()
			return g, nil
		}
		ch := l.changed.C() // closed by the next grant, loss, Close or end
		l.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// Participants lists the election's participants in queue order: the first
// is the leader (or will be, once its grant is made), the others follow in
// the order they joined. Each Participant's Data is its id, Token its
// node's czxid, SessionID its node's ephemeral owner. ZooKeeper operations:
// getChildren, then getData per znode. A missing directory gives an empty
// list. Errors: recipe.ErrMixedRecipes when the directory holds another
// recipe's nodes; *recipe.OpError, recipe.ErrSessionClosed, ctx's cause.
func (l *Latch) Participants(ctx context.Context) ([]zookeeper.Participant, error) {
	return l.q.Participants(ctx)
}

// Leader returns the first participant of the election now: the leader, or
// the participant that will be granted leadership next (a leader whose
// connection is SUSPENDED keeps its place but does not lead until
// RECONNECTED; Curator's getLeader answers the same). ZooKeeper operations:
// getChildren, then getData of the first znode. Errors: ErrNoLeader when
// nobody participates (empty or missing directory); recipe.ErrMixedRecipes
// when it holds another recipe's nodes; *recipe.OpError,
// recipe.ErrSessionClosed, ctx's cause.
func (l *Latch) Leader(ctx context.Context) (zookeeper.Participant, error) {
	h, err := l.q.Head(ctx)
	if err != nil {
		return zookeeper.Participant{}, err
	}
	if !h.Present {
		return zookeeper.Participant{}, fmt.Errorf("%w: %s", ErrNoLeader, recipe.ShortPath(l.q.Dir()))
	}
	return h.Node, nil
}

// Close leaves the election for good (case C12). It stops the participant
// (a join or wait in progress is abandoned), waits for its goroutine to end,
// deletes its znode (ending a grant with cause recipe.ErrReleased), waits
// until a create that was still in flight has landed and been deleted, and
// then delivers a final Change (Leader false, Cause ErrClosed) to every
// listener and closes their channels. After Close returns nil, this
// participant has no znode and never creates one again: Start and Await
// return ErrClosed.
//
// When the connection is down, the delete of a node whose create's outcome
// is unknown (or of the participant's node) waits for the reconnection of
// the same ZooKeeper session, and Close waits with it (zookeeper.Queue.Drain),
// until ctx ends; if the session is lost instead, its nodes went with it.
// A node left by a Close that returned ctx's error is never granted (its
// participant is gone) and is deleted by the Session's cleaner on
// reconnection.
//
// The delete (the grant's Release while leading, else a delete that checks
// the node's owner first: zookeeper.Ticket.Leave; see
// docs/design.md#acquisition) is sent even if ctx is already done, and
// retried on connection loss until the session's cleanup timeout.
//
// Close is idempotent and may be called before Start. Errors: ctx's cause
// when ctx ended before the participant stopped or before an in-flight create
// landed; an *recipe.OpError when the delete could not be confirmed (it was
// handed to the Session's cleaner, which retries on reconnection; the node
// goes with the session at the latest). Call Close again to wait for the
// rest; listeners get their final Change in any case, when Close returns.
func (l *Latch) Close(ctx context.Context) error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		l.cancel(ErrClosed)
		l.changed.Notify()
	}
	done := l.done
	l.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			// The participant is closed (it never leads again, and its
			// goroutine deletes its node as it ends): tell listeners now.
			l.mu.Lock()
			l.finishLocked(ErrClosed)
			l.mu.Unlock()
			return context.Cause(ctx)
		}
	}
	l.mu.Lock()
	t := l.ticket
	l.phase = phaseEnded
	if l.endErr == nil {
		l.endErr = ErrClosed
	}
	l.mu.Unlock()
	var err error
	if t != nil {
		err = t.Leave(ctx)
	}
	if derr := l.q.Drain(ctx); derr != nil && err == nil {
		err = derr
	}
	l.mu.Lock()
	l.finishLocked(ErrClosed)
	l.mu.Unlock()
	return err
}

// grant is the Lease Await returns: the engine's lease of the participant's
// node, whose Release closes the latch.
type grant struct {
	l     *Latch
	inner recipe.Lease
	at    time.Time // when the loop got it
}

var _ zookeeper.NodeLease = (*grant)(nil)

// Token returns the czxid of the participant's znode: larger than the token
// of every earlier leader of the election; equal to the token of this
// participant's previous grant when leadership came back after a suspension
// within the same session.
func (g *grant) Token() fence.Token { return g.inner.Token() }

// Context is done when this leadership ends; context.Cause says why.
func (g *grant) Context() context.Context { return g.inner.Context() }

// Path returns the participant's znode (relative to the session's chroot).
func (g *grant) Path() string {
	if p, ok := g.inner.(zookeeper.NodeLease); ok {
		return p.Path()
	}
	return ""
}

// Release closes the latch (Latch.Close: leadership is given up for good,
// the node deleted, listeners told). Errors: recipe.ErrLeaseLost (wrapping
// the cause) when this leadership had already ended before Release (the
// latch is closed all the same); otherwise Close's errors.
func (g *grant) Release(ctx context.Context) error {
	lostBefore := g.inner.Context().Err() != nil
	cause := context.Cause(g.inner.Context())
	err := g.l.Close(ctx)
	if lostBefore && !errors.Is(cause, recipe.ErrReleased) {
		return fmt.Errorf("%w (%w)", recipe.ErrLeaseLost, cause)
	}
	return err
}
