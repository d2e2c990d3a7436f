package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"github.com/go-zookeeper/zk"
	"sync"

	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Ticket is a node of a Queue that keeps its place across grants (Curator's
// LeaderLatch): a lease granted to it ends like any lease (at SUSPENDED
// under the suspend policy, at session loss, when its node is deleted), but
// its node is not deleted then, and Await can grant it again with the same
// token once the connection is back in the same ZooKeeper session. It dies
// with its session or its node; Await then fails and the caller joins again.
// Safe for concurrent use, though one Await at a time is meaningful.
type Ticket struct {
	q     *Queue
	name  string // child name
	path  string // absolute
	ep    *epoch
	owner int64
	keep  bool
	token int64           // for an anchored node: its anchor's token
	rep   *grant.Reporter // its queue's, for its kind

	mu    sync.Mutex
	dead  error // why the ticket can no longer be granted
	lease *lease
}

// Join creates the caller's node (ephemeral sequential, protected name, of
// kind, carrying data) and returns its Ticket without waiting for a grant
// (operations: docs/design.md#acquisition): a plain create, none of
// Acquire's fast paths, as a Ticket may be granted long after it. Errors: as
// Acquire (none leaves a node behind).
func (q *Queue) Join(ctx context.Context, kind string, data []byte) (*Ticket, error) {
	return q.join(ctx, kind, data, nil, true, nil)
}

// Name returns the ticket's znode name (a child of the queue directory).
func (t *Ticket) Name() string { return t.name }

// Err returns nil while the ticket can still be granted, and otherwise why
// not: recipe.ErrSessionLost or recipe.ErrSessionClosed (the node went with its session),
// recipe.ErrNodeDeleted (deleted by someone else), recipe.ErrReleased (Leave was called,
// or its grant was released, which deletes the node). The first cause
// found sticks.
func (t *Ticket) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dead != nil {
		return t.dead
	}
	if t.lease != nil {
		// The grant's Release deletes the node; a deletion by anyone else
		// ends the grant: either way the place is gone.
		switch c := context.Cause(t.lease.Context()); {
		case errors.Is(c, recipe.ErrReleased):
			return recipe.ErrReleased
		case errors.Is(c, recipe.ErrNodeDeleted):
			return recipe.ErrNodeDeleted
		}
	}
	if t.ep.ctx.Err() != nil {
		return context.Cause(t.ep.ctx)
	}
	return nil
}

// Await blocks until the Rule grants the ticket's node, and returns the
// lease (see Ticket for its token and for what happens at SUSPENDED). A
// SUSPENDED connection is waited out. Its ZooKeeper operations are in
// docs/design.md#acquisition. Errors: ctx's cause (the node stays: call
// Leave to give the place up); recipe.ErrSessionLost, recipe.ErrSessionClosed,
// recipe.ErrNodeDeleted or recipe.ErrReleased when the ticket is dead (its node is gone,
// or deleted now); *recipe.OpError for refusals.
func (t *Ticket) Await(ctx context.Context) (recipe.Lease, error) {
	l, err := t.await(ctx, true, nil)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Leave gives the ticket's place up: it ends a live lease of the ticket
// (cause recipe.ErrReleased) and deletes the node with an identity check, ignoring
// ctx's cancellation for the first attempt and handing a delete that can't
// complete to the Session's cleaner. It is idempotent. Errors: as
// recipe.Lease.Release for the delete (recipe.ErrLeaseLost is not reported).
func (t *Ticket) Leave(ctx context.Context) error {
	t.mu.Lock()
	if t.dead == nil {
		t.dead = recipe.ErrReleased
	}
	l := t.lease
	t.mu.Unlock()
	if l != nil {
		if err := l.Release(ctx); err == nil || !errors.Is(err, recipe.ErrLeaseLost) {
			return err
		}
	}
	err := t.q.d.deleteOwned(ctx, cleanupItem{path: t.path, owner: t.owner}, true)
	if err != nil {
		return &recipe.OpError{Op: "delete", Path: t.q.d.dir + "/" + t.name, Err: zkError{err}}
	}
	return nil
}

// deleteOwned is the cleaner's delete, counted in q.pending until finished.
func (q *qdir) deleteOwned(ctx context.Context, it cleanupItem, wait bool) error {
	q.pending.add()
	it.done = q.pending.done
	return q.s.cleaner.delete(ctx, it, wait)
}

// leaseNode is what a lease of t is granted on.
func (t *Ticket) leaseNode() leaseNode {
	return leaseNode{path: t.path, owner: t.owner, token: t.token, keep: t.keep, rep: t.rep}
}

// abandon deletes the ticket's node after a failure, ignoring the caller's
// cancellation: it waits while the connection is up (at most the cleanup
// timeout), and the cleaner finishes what it could not.
func (t *Ticket) abandon(ctx context.Context) {
	t.mu.Lock()
	if t.dead == nil {
		t.dead = recipe.ErrReleased
	}
	t.mu.Unlock()
	t.q.d.deleteOwned(ctx, cleanupItem{path: t.path, owner: t.owner}, false)
}

// await runs the core loop for t; an error that kills a kept ticket marks
// it dead and deletes a node a presumed-lost session may still own.
func (t *Ticket) await(ctx context.Context, wait bool, fs *fastStart) (*lease, error) {
	if err := t.Err(); err != nil {
		if fs != nil && fs.pre != nil {
			t.q.d.s.leases.drop(fs.pre)
		}
		return nil, err
	}
	l, err := (&waiter{q: t.q, d: &t.q.d, t: t, ep: t.ep, block: wait}).run(ctx, fs)
	if err != nil {
		if t.keep && (errors.Is(err, recipe.ErrSessionLost) || errors.Is(err, recipe.ErrNodeDeleted) || errors.Is(err, recipe.ErrSessionClosed)) {
			t.mu.Lock()
			if t.dead == nil {
				t.dead = err
			}
			t.mu.Unlock()
			t.abandon(ctx)
		}
		return nil, err
	}
	t.mu.Lock()
	t.lease = l
	t.mu.Unlock()
	return l, nil
}

// adopt moves t to the session cur after its create was sent under an
// earlier one: the node must exist and belong to cur, or t is abandoned.
// The check is retried across connection losses (the new session's
// connection may still be coming up when a thawed process gets here): a
// connection error is not an answer.
func (t *Ticket) adopt(ctx context.Context, cur *epoch) error {
	s := t.q.d.s
	t.ep, t.owner = cur, cur.id
	var ok bool
	var st *zk.Stat
	err := s.req.retry(ctx, t.q.d.reqSize, func() (err error) {
		ok, st, err = s.conn.Exists(t.path)
		return err
	})
	if err == nil && (!ok || st.EphemeralOwner != cur.id) {
		err = fmt.Errorf("%w: node created under a session that is gone", recipe.ErrSessionLost)
	}
	if err != nil {
		t.abandon(ctx)
		return t.q.d.wrap("create", err)
	}
	return nil
}
