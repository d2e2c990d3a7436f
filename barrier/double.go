package barrier

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Kind is the node kind of a double barrier's participant znodes
// ("_c_<guid>-barrier-<sequence>").
const Kind = "barrier-"

// ErrEntered is returned by Enter on a DoubleBarrier that has entered, or
// is entering or leaving, already; nothing is sent.
var ErrEntered = errors.New("barrier: already entered")

// ErrNotEntered is returned by Leave on a DoubleBarrier that has not
// entered (or is still entering, or left already); nothing is sent.
var ErrNotEntered = errors.New("barrier: not entered")

// ErrCountMismatch is returned by Enter when another participant of the
// directory was made with another count n: participants must agree on n.
var ErrCountMismatch = errors.New("barrier: participants disagree on the count")

// DoubleOption configures NewDouble.
type DoubleOption func(*DoubleBarrier)

// WithData sets the data the participant's znode carries after the
// barrier's own header line (an id or an address, for tools that list the
// directory; default none). It is bounded as a queue node's data
// (zookeeper.MaxNodeData, and the packet limit: NewDouble checks it).
func WithData(data []byte) DoubleOption {
	return func(b *DoubleBarrier) { b.data = append([]byte(nil), data...) }
}

// state is where a DoubleBarrier is between Enter and Leave.
type state uint8

const (
	idle     state = iota // no node: Enter may be called
	entering              // Enter runs
	entered               // the node is marked: Leave may be called
	leaving               // Leave runs
)

// DoubleBarrier is one participant of a double barrier in a directory
// (Curator's DistributedDoubleBarrier, the ZooKeeper recipes page's
// "Double Barriers"): Enter blocks until n participants have entered,
// Leave until all have left (see the package doc). It is safe for
// concurrent use; one Enter and one Leave at a time are meaningful (others
// get ErrEntered or ErrNotEntered).
type DoubleBarrier struct {
	q    *zookeeper.Queue
	s    *zookeeper.Session
	dir  string
	n    int
	data []byte

	mu    sync.Mutex
	state state
	t     *zookeeper.Ticket // the node, while entered or leaving
	mark  int64             // its mark, while entered or leaving
}

// NewDouble returns a participant of the double barrier of n participants
// in directory dir (below the session's chroot) on s. It sends nothing.
// Errors: recipe.ErrBadOption for n < 1 or a nil s; a *zookeeper.PathError
// (recipe.ErrInvalidPath) for a directory the recipes refuse (package
// zookeeper, "Paths"); recipe.ErrTooLarge for WithData's data over the
// limits; recipe.ErrSessionClosed.
func NewDouble(s *zookeeper.Session, dir string, n int, opts ...DoubleOption) (*DoubleBarrier, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: barrier: count %d (at least 1)", recipe.ErrBadOption, n)
	}
	q, err := zookeeper.NewQueue(s, dir, []string{Kind}, allHold)
	if err != nil {
		return nil, err
	}
	b := &DoubleBarrier{q: q, s: s, dir: dir, n: n}
	for _, o := range opts {
		if o != nil {
			o(b)
		}
	}
	if err := q.CheckNodeData(b.encode(math.MaxInt64)); err != nil {
		return nil, err
	}
	return b, nil
}

// allHold is the queue's Rule: the engine is used for its nodes (protected
// creates, cleanup), never for grants.
func allHold([]zookeeper.NodeName, int) (bool, []int) { return true, nil }

// Path returns the barrier's directory (relative to the session's chroot).
func (b *DoubleBarrier) Path() string { return b.dir }

// Enter joins the barrier and blocks until n participants have entered:
// it creates an ephemeral sequential znode (protected name), follows the
// directory (Queue.ObserveSnapshots) until the rule of the package doc
// says entered, then marks its node (setData). A SUSPENDED connection is
// waited out. Errors: ErrEntered; ErrCountMismatch; ctx's cause;
// recipe.ErrSessionLost, ErrSessionClosed, ErrNodeDeleted; as Queue.Join.
// An error leaves no node (its delete ignores ctx, bounded by the
// Session's cleanup timeout, and the Session's cleaner finishes it).
func (b *DoubleBarrier) Enter(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", recipe.ErrBadOption)
	}
	b.mu.Lock()
	if b.state != idle {
		b.mu.Unlock()
		return ErrEntered
	}
	b.state = entering
	b.mu.Unlock()
	t, mark, err := b.enter(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.state = idle
		return err
	}
	b.state, b.t, b.mark = entered, t, mark
	return nil
}

// enter is Enter's work: join, wait, mark; on an error the node goes.
func (b *DoubleBarrier) enter(ctx context.Context) (*zookeeper.Ticket, int64, error) {
	t, err := b.q.Join(ctx, Kind, b.encode(0))
	if err != nil {
		return nil, 0, err // Join leaves no node
	}
	mark, err := b.until(ctx, t, b.enterRule(t.Name()))
	if err == nil {
		_, err = t.SetData(ctx, b.encode(mark), 0)
	}
	if err != nil {
		_ = t.Leave(ctx) // deletes whatever ctx has become; the cleaner finishes
		return nil, 0, err
	}
	return t, mark, nil
}

// Leave blocks until every participant of its round has left: it waits
// until every node of the round is marked entered (so that no slow
// participant still needs this node to see the count), deletes its node,
// then waits until the nodes it saw entered are gone. Errors: ErrNotEntered; ctx's
// cause before the delete (still entered: call Leave again) or after it
// (left: only the wait for the others was cut short; a second Leave tells
// which, ErrNotEntered once left); recipe.ErrSessionLost or ErrNodeDeleted
// (the node went: left); as Ticket.Leave.
func (b *DoubleBarrier) Leave(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", recipe.ErrBadOption)
	}
	b.mu.Lock()
	if b.state != entered {
		b.mu.Unlock()
		return ErrNotEntered
	}
	b.state = leaving
	t, mark := b.t, b.mark
	b.mu.Unlock()
	var round map[string]bool // the round's entered nodes, at the snapshot that showed them all marked
	_, err := b.until(ctx, t, b.allMarked(mark, &round))
	if err != nil && t.Err() == nil && !errors.Is(err, recipe.ErrNodeDeleted) {
		b.mu.Lock()
		b.state = entered // the node stays: Leave may be called again
		b.mu.Unlock()
		return err
	}
	// Delete the node (or a node a lost session may still own); the delete
	// ignores ctx's cancellation, as Enter's cleanup does.
	if lerr := t.Leave(ctx); err == nil {
		err = lerr
	}
	b.mu.Lock()
	b.state, b.t = idle, nil
	b.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = b.until(ctx, nil, b.noneLeft(round))
	return err
}
