// Package latch provides a leader latch on ZooKeeper: Apache Curator's
// LeaderLatch semantics, with fencing tokens.
//
// A participant (a Latch, with an id of the caller's choice) joins an
// election under a directory and stays in it until Close: it is the leader
// while its znode is the first of the directory (the "Leader Election"
// recipe of the ZooKeeper recipes page, as Curator's LeaderLatch implements
// it). Start joins; Await blocks until this participant leads; IsLeader
// tells at once; Listen delivers every change of leadership in order without
// ever blocking the client; Participants and Leader show the election; Close
// leaves it for good.
//
// # What happens when
//
//   - Joining creates one ephemeral sequential znode (protected name, data:
//     the id) under the directory, creating the directory and its missing
//     parents as container znodes. Each participant watches only its
//     immediate predecessor (no herd effect); the lowest node leads.
//   - A vanished predecessor makes the participant list the directory again
//     and re-decide; it never deletes and re-creates its own node (no
//     leapfrog livelock, case C11). Only Close deletes the node.
//   - SUSPENDED (the connection dropped, or no server replied for 2/3 of the
//     session timeout; see recipe.RevokeOnSuspend) ends leadership at once
//     by default: the grant's context ends with recipe.ErrSuspended and
//     listeners are told "not leader". The znode is kept: when the
//     connection comes back within the same ZooKeeper session
//     (RECONNECTED), the participant is still in its place and, if it is
//     still first, leads again with the same node and the same token.
//     Session options such as recipe.TolerateSuspension change when
//     SUSPENDED ends ownership, exactly as for every other recipe.
//   - When the session is lost (expired, or presumed expired), the node went
//     with it: the participant joins again with a new node under the new
//     session, behind everyone already there, as Curator does. The same
//     happens when its node is deleted by someone else, and when the whole
//     directory is deleted under live participants (an operator's
//     deleteall, a restore from an old snapshot: case C17): participants
//     re-create it and elect a leader. Re-joins back off (50 ms doubling to
//     2 s) when they keep failing; they never spin. An error that retrying
//     cannot cure (recipe.Permanent: another recipe's nodes in the
//     directory, recipe.ErrMixedRecipes, once the next attempt after the
//     backoff meets them too, as recipe.Stopper says; an ACL refusal) is
//     not retried: it ends the participant (logged at error level, its
//     node deleted), Await returns it and listeners get a final Change
//     with it as Cause.
//   - Before leadership is claimed, the engine reads the node's Stat and
//     checks that its ephemeral owner is the current ZooKeeper session
//     (recipe.Queue's grant): a node created under an earlier session of
//     the same client is never taken for ours.
//   - Close is final (case C12): it stops the participant, deletes its node,
//     waits for any create still in flight to land and be deleted, gives
//     listeners a final "not leader" and closes their channels. After Close
//     returns nil the participant has no node and never creates one (see
//     Close for the one case, a create whose reply is lost in a connection
//     drop during Close, where the node's delete waits for reconnection).
//   - Closing the Session ends the latch too: leadership ends with
//     recipe.ErrSessionClosed, Await returns that error, listeners get a
//     final "not leader" and are closed.
//
// # Tokens
//
// Every grant of leadership returns a recipe.Lease whose Token is the czxid
// of the node that won: ZooKeeper's ensemble-wide, strictly increasing
// creation zxid, so a later leader always has a larger token than every
// earlier one, also across sessions and across a deleted and re-created
// directory. A grant made again to the same node after RECONNECTED has the
// same token as before the suspension: nobody else can have been granted in
// between, since the node kept its place (fence.Guard accepts an equal
// token). After a session loss the participant's new node has a larger token
// than anything granted before. The lease's Context ends the moment
// leadership does (context.Cause says why: recipe.ErrSuspended,
// recipe.ErrSessionLost, recipe.ErrNodeDeleted, recipe.ErrReleased at
// Close, recipe.ErrSessionClosed). Leadership is a lease, not a fact: a
// leader that pauses can resume after it ended. Guard the resource with the
// token (package fence).
//
// # Permissions
//
// The session needs CREATE and DELETE on the directory (and CREATE on the
// first existing ancestor below the chroot, if the directory must be
// created), READ to list it. Keep the directory for the latch: foreign
// children are ignored, except those imitating this package's node names.
package latch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/internal/notify"
	"github.com/zkrecipes/zkrecipes/recipe"
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
// (default: the Session's logger, recipe.Session.Logger).
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
	q    *recipe.Queue
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
	ticket    *recipe.Ticket
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
// Errors: a *recipe.PathError (matching recipe.ErrInvalidPath) for an
// invalid path (also, matching recipe.ErrTooLarge, for one too long for the
// session's packet limit); recipe.ErrBadOption for a nil session or an id
// over recipe.MaxNodeData bytes; recipe.ErrTooLarge for an id over that or
// too large for the packet limit with the path; recipe.ErrSessionClosed
// when s is closed.
func New(s *recipe.Session, path string, id string, opts ...Option) (*Latch, error) {
	q, err := recipe.NewQueue(s, path, []string{Kind}, recipe.FirstHolds)
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
// Await). It does not wait for leadership: use Await or Listen.
//
// ZooKeeper operations: create (after a lost reply also sync and
// getChildren, to adopt the node; see recipe.Queue.Join). The participant
// then performs, per wakeup, a getChildren of the directory and a getData
// watch on its immediate predecessor; at each grant a getData watch on its
// own znode (the Stat gives the owner check and the token); after losing
// its node, a new create (see the package documentation).
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

// Backoff between failed re-joins or waits.
const (
	backoffInitial = 50 * time.Millisecond
	backoffMax     = 2 * time.Second
)

// waitFailed and rejoinFailed are the warnings of a retried wait and join.
const (
	waitFailed   = "latch: waiting for leadership failed; retrying"
	rejoinFailed = "latch: re-joining failed; retrying"
)

// participant is the state of one run of the participant loop.
type participant struct {
	l       *Latch
	t       *recipe.Ticket // the current ticket: its node keeps our place
	stop    recipe.Stopper
	joining bool // the last attempt failed to join (else: to wait)
}

// run is the participant loop (loop.Loop, as leader.Run's): wait for the
// grant on the ticket, lead until the grant ends, wait again on the same
// ticket while it lives (same session, node in place), join again with a
// new ticket when it died. It ends when the latch is closed, or on an error
// that retrying cannot cure (then the latch ends with it).
func (l *Latch) run(t *recipe.Ticket, done chan struct{}) {
	defer close(done)
	p := &participant{l: l, t: t}
	defer func() {
		// Whatever ended the loop, the node goes now, even if Close stops
		// waiting (its own Leave is then a confirmation, and reports
		// errors). A dead ticket's node is gone already; a closed
		// session's node went with it.
		_ = p.t.Leave(context.Background())
	}()
	lp := loop.Loop{
		BackOff:  loop.BackOff(backoffInitial, backoffMax),
		Max:      backoffMax,
		Ends:     func(err error) bool { return p.stop.Stop(err, recipe.Permanent(err)) },
		Retrying: p.retrying,
	}
	if err := lp.Run(l.ctx, p.attempt); !errors.Is(err, ErrClosed) {
		l.stop(err)
	}
}

// attempt is one turn of the loop: join again if the ticket died, wait for
// the grant, lead until it ends.
func (p *participant) attempt(ctx context.Context) (loop.Next, error) {
	l := p.l
	p.joining = p.t.Err() != nil
	if p.joining {
		// The ticket died with its session or its node: join again. (Its
		// node is gone, or its deletion was handed to the Session's
		// cleaner by the engine.)
		why := p.t.Err()
		nt, err := l.q.Join(ctx, Kind, l.data)
		if err != nil {
			return loop.Wait, err
		}
		p.t = nt
		l.mu.Lock()
		l.ticket = nt
		l.mu.Unlock()
		l.log.Info("latch: re-joined", "dir", recipe.ShortPath(l.q.Dir()), "id", l.id, "node", nt.Name(),
			"session", fmt.Sprintf("0x%x", nt.SessionID()), "after", why)
		p.joining = false
	}
	start := time.Now()
	lease, err := p.t.Await(ctx)
	if err != nil {
		// A wait that failed at once backs off; one that waited long (a
		// session lost after a while) re-joins at once.
		if time.Since(start) < backoffMax {
			return loop.Wait, err
		}
		return loop.Now, err
	}
	return loop.Now, l.hold(ctx, lease)
}

func (p *participant) retrying(err error) {
	l := p.l
	switch {
	case p.joining:
		l.log.Warn(rejoinFailed, "dir", recipe.ShortPath(l.q.Dir()), "id", l.id, "err", err)
	case p.t.Err() == nil:
		l.log.Warn(waitFailed, "dir", recipe.ShortPath(l.q.Dir()), "id", l.id, "err", err)
	}
}

// hold publishes the grant, waits for its end and publishes that. It
// returns recipe.ErrSessionClosed when the grant ended with the session
// (which ends the loop), ctx's cause when the latch was closed.
func (l *Latch) hold(ctx context.Context, lease recipe.Lease) error {
	g := &grant{l: l, inner: lease, at: time.Now()}
	if !l.lead(g) {
		return context.Cause(ctx) // closed meanwhile: run's Leave releases it
	}
	select {
	case <-lease.Context().Done():
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	cause := context.Cause(lease.Context())
	if errors.Is(cause, recipe.ErrSessionClosed) {
		return recipe.ErrSessionClosed
	}
	l.follow(g, cause)
	return nil
}

// lead publishes a grant; it reports false when the latch is closed.
func (l *Latch) lead(g *grant) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.cur = g
	l.listeners.Push(Change{Leader: true, Token: g.Token(), Lease: g, At: g.at})
	l.changed.Notify()
	return true
}

// follow publishes the end of grant g.
func (l *Latch) follow(g *grant, cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == g {
		l.cur = nil
	}
	if l.closed {
		return // Close delivers the final Change
	}
	l.listeners.Push(Change{Leader: false, Token: g.Token(), At: time.Now(), Cause: cause})
	l.changed.Notify()
}

// stop ends the participant on an error that retrying cannot cure
// (recipe.Permanent): its node goes (run's deferred Leave), Await returns
// err, listeners get their final Change with it.
func (l *Latch) stop(err error) {
	if !errors.Is(err, recipe.ErrSessionClosed) {
		l.log.Error("latch: stopped: retrying cannot help", "dir", recipe.ShortPath(l.q.Dir()), "id", l.id, "err", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phase = phaseEnded
	if l.endErr == nil {
		l.endErr = err
	}
	l.finishLocked(err)
}

// finishLocked delivers the final Change (once) and lets every listener
// close its channel after it.
func (l *Latch) finishLocked(cause error) {
	if l.listeners.Finished() {
		return
	}
	var tok fence.Token
	if l.cur != nil {
		tok = l.cur.Token()
	}
	l.cur = nil
	l.listeners.Finish(Change{Leader: false, Token: tok, At: time.Now(), Cause: cause})
	l.changed.Notify()
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

// Listen returns a channel that receives every change of this
// participant's leadership from now on, in order: Leader true when it
// becomes leader, Leader false (with the Cause) when that leadership ends.
// If the participant leads when Listen is called, the current grant comes
// first. Close (or the end of the session) delivers a final Change with
// Leader false (Cause ErrClosed, or recipe.ErrSessionClosed) and then
// closes the channel; when ctx ends, the channel is closed at once
// (undelivered changes are dropped). After Close, Listen returns a closed
// channel.
//
// Delivery never blocks the latch, the Session nor go-zookeeper's event
// dispatch (case C19): each listener has its own unbounded queue and
// goroutine, so a slow reader only delays itself. That goroutine lives until
// the channel is closed, so a reader must keep reading until then or cancel
// ctx.
func (l *Latch) Listen(ctx context.Context) <-chan Change {
	f := notify.NewFeed[Change]()
	l.mu.Lock()
	if !l.listeners.Add(f) {
		l.mu.Unlock()
		f.Close()
		return f.C()
	}
	if g := l.cur; g != nil && g.inner.Context().Err() == nil {
		f.Push(Change{Leader: true, Token: g.Token(), Lease: g, At: g.at})
	}
	l.mu.Unlock()
	go func() {
		defer func() {
			l.mu.Lock()
			l.listeners.Remove(f)
			l.mu.Unlock()
		}()
		f.Run(ctx, nil)
	}()
	return f.C()
}

// Participants lists the election's participants in queue order: the first
// is the leader (or will be, once its grant is made), the others follow in
// the order they joined. Each Participant's Data is its id, Token its
// node's czxid, SessionID its node's ephemeral owner. ZooKeeper operations:
// getChildren, then getData per znode. A missing directory gives an empty
// list. Errors: recipe.ErrMixedRecipes when the directory holds another
// recipe's nodes; *recipe.OpError, recipe.ErrSessionClosed, ctx's cause.
func (l *Latch) Participants(ctx context.Context) ([]recipe.Participant, error) {
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
func (l *Latch) Leader(ctx context.Context) (recipe.Participant, error) {
	h, err := l.q.Head(ctx)
	if err != nil {
		return recipe.Participant{}, err
	}
	if !h.Present {
		return recipe.Participant{}, fmt.Errorf("%w: %s", ErrNoLeader, recipe.ShortPath(l.q.Dir()))
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
// the same ZooKeeper session, and Close waits with it (recipe.Queue.Drain),
// until ctx ends; if the session is lost instead, its nodes went with it.
// A node left by a Close that returned ctx's error is never granted (its
// participant is gone) and is deleted by the Session's cleaner on
// reconnection.
//
// ZooKeeper operations: exists and delete of the participant's znode (with
// an identity check: ephemeral owner and czxid); the delete is sent even if
// ctx is already done and retried on connection loss until the session's
// cleanup timeout.
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

var _ recipe.NodeLease = (*grant)(nil)

// Token returns the czxid of the participant's znode: larger than the token
// of every earlier leader of the election; equal to the token of this
// participant's previous grant when leadership came back after a suspension
// within the same session.
func (g *grant) Token() fence.Token { return g.inner.Token() }

// Context is done when this leadership ends; context.Cause says why.
func (g *grant) Context() context.Context { return g.inner.Context() }

// Path returns the participant's znode (relative to the session's chroot).
func (g *grant) Path() string {
	if p, ok := g.inner.(recipe.NodeLease); ok {
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
