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
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Kind is the node kind of latch znodes ("_c_<guid>-latch-<sequence>").
const Kind = "latch-"

// Errors of this package. Each matches with errors.Is.
var (
	// ErrClosed is returned by Start and Await once Close was called, and is
	// the Cause of the final Change a listener receives from Close.
	ErrClosed = errors.New("latch: closed")

	// ErrAlreadyStarted is returned by Start while the latch is started or
	// starting.
	ErrAlreadyStarted = errors.New("latch: already started")

	// ErrNotStarted is returned by Await before a Start succeeded.
	ErrNotStarted = errors.New("latch: not started")

	// ErrNoLeader is returned by Leader for an empty or missing directory.
	ErrNoLeader = errors.New("latch: no leader")
)

// Change is one change of this participant's leadership, from Listen.
type Change struct {
	// Leader is true when this participant became leader, false when it
	// stopped (or, for the final Change, never was).
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
	// Cause says why leadership ended (nil when Leader): recipe.ErrSuspended,
	// ErrSessionLost, ErrNodeDeleted, ErrSessionClosed; for the final Change,
	// ErrClosed or the error that stopped the participant (see Await).
	Cause error
}

// Option configures New.
type Option func(*Latch)

// WithLogger sets the logger for the participant's re-joins and retries
// (default: the Session's logger, zookeeper.WithLogger).
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

// Latch is one participant of a leader election (see the package doc):
// New, Start, Close. All methods are safe for concurrent use.
type Latch struct {
	s    *zookeeper.Session
	q    *zookeeper.Queue
	path string
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
// directory path on session s. The id is its znode's data, shown by
// Participants and Leader; it need not be unique. New performs no ZooKeeper
// operation. Errors: as mutex.New, with the id as the data.
func New(s *zookeeper.Session, path string, id string, opts ...Option) (*Latch, error) {
	q, err := zookeeper.NewQueue(s, path, []string{Kind}, zookeeper.FirstHolds)
	if err != nil {
		return nil, err
	}
	if err := q.CheckNodeData([]byte(id)); err != nil {
		return nil, fmt.Errorf("latch id: %w", err)
	}
	l := &Latch{
		s:    s,
		q:    q,
		path: path,
		id:   id,
		data: []byte(id),
		log:  zkside.SessionOf(s).Logger(),
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
func (l *Latch) Path() string { return l.path }

// Start joins the election: it creates the participant's znode (ephemeral
// sequential, data: the id) and returns once it exists, then runs the
// participant in a goroutine until Close, the session's close, or an error
// retrying cannot cure (see Await). It does not wait for leadership: use
// Await or Listen. ZooKeeper operations: Queue.Join and Ticket.Await in
// docs/design.md#acquisition. Errors: ErrAlreadyStarted; ErrClosed (also
// when Close ran during the join: the node is then deleted); ctx's cause
// (nothing left behind); recipe.ErrSessionClosed; *recipe.OpError (matching
// recipe.ErrNoPermission on ACL refusals). After the last three, Start may
// be called again.
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

// IsLeader reports whether this participant leads now (its grant's context
// is live), without any ZooKeeper operation.
func (l *Latch) IsLeader() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.closed && l.cur != nil && l.cur.inner.Context().Err() == nil
}

// Await blocks until this participant leads and returns the grant, at once
// if it leads now: a recipe.Lease whose Token is its node's czxid, whose
// Context ends with this leadership, and whose Release is Close (returning
// recipe.ErrLeaseLost, wrapping the cause, if leadership had ended before).
// It performs no ZooKeeper operation. Errors: ctx's cause; ErrNotStarted;
// ErrClosed; recipe.ErrSessionClosed; the error that stopped the
// participant when retrying could not cure it (recipe.Permanent).
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

// Participants lists the participants in queue order, the leader (or the
// next to be granted) first, each with its id as Data; operations and
// errors as mutex.Mutex.Participants.
func (l *Latch) Participants(ctx context.Context) ([]zookeeper.Participant, error) {
	return l.q.Participants(ctx)
}

// Leader returns the first participant (getChildren, then getData of its
// znode): the leader, or the next to lead (a suspended leader keeps its
// place; Curator's getLeader answers the same). Errors: ErrNoLeader for an
// empty or missing directory; else as Participants.
func (l *Latch) Leader(ctx context.Context) (zookeeper.Participant, error) {
	h, err := l.q.Head(ctx)
	if err != nil {
		return zookeeper.Participant{}, err
	}
	if !h.Present {
		return zookeeper.Participant{}, fmt.Errorf("%w: %s", ErrNoLeader, shortpath.Of(l.path))
	}
	return h.Node, nil
}

// Close leaves the election for good (C12): it stops the participant,
// deletes its znode (ending a grant with recipe.ErrReleased; sent even if
// ctx is done, retried on connection loss up to the cleanup timeout), waits
// until a create still in flight has landed and been deleted, then gives
// every listener a final Change (Leader false, Cause ErrClosed) and closes
// it. After Close returns nil the participant has no znode and never creates
// one; Start and Await return ErrClosed. Close is idempotent and may precede
// Start. Errors: ctx's cause (with the connection down, Close waits for a
// reconnection); an *recipe.OpError when the delete could not be confirmed
// (the Session's cleaner retries it). Call Close again to wait for the rest.
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

var _ interface{ Path() string } = (*grant)(nil) // as every ZooKeeper grant

// Token is the czxid of the participant's znode (the same after a healed
// suspension).
func (g *grant) Token() fence.Token { return g.inner.Token() }

// Context is done when this leadership ends; context.Cause says why.
func (g *grant) Context() context.Context { return g.inner.Context() }

// Path returns the participant's znode (relative to the session's chroot).
func (g *grant) Path() string {
	if p, ok := g.inner.(interface{ Path() string }); ok {
		return p.Path()
	}
	return ""
}

// Release is Latch.Close; it returns recipe.ErrLeaseLost (wrapping the
// cause) when this leadership had ended before, else Close's error.
func (g *grant) Release(ctx context.Context) error {
	if ctx == nil { // recipe.Lease's contract
		ctx = context.Background()
	}
	lostBefore := g.inner.Context().Err() != nil
	cause := context.Cause(g.inner.Context())
	err := g.l.Close(ctx)
	if lostBefore && !errors.Is(cause, recipe.ErrReleased) {
		return fmt.Errorf("%w (%w)", recipe.ErrLeaseLost, cause)
	}
	return err
}
