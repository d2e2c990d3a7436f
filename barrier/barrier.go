package barrier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Barrier is a barrier in one persistent znode (Curator's
// DistributedBarrier, the "Barriers" of the ZooKeeper recipes page): Wait
// blocks while the node exists. Set and Remove are idempotent; all methods
// are safe for concurrent use.
type Barrier struct {
	n   *zookeeper.ValueNode
	log *slog.Logger // nil: the Session's
}

// BarrierOption configures New.
type BarrierOption func(*Barrier)

// WithWaitLogger sets the logger of Wait's watches (reads that failed and
// are retried; default: the Session's logger, zookeeper.WithLogger).
func WithWaitLogger(l *slog.Logger) BarrierOption {
	return func(b *Barrier) { b.log = l }
}

// New returns the barrier in the znode at path (below the session's
// chroot) on s. It sends nothing. Errors: a *zookeeper.PathError (matching
// recipe.ErrInvalidPath) for a path the recipes refuse (package zookeeper,
// "Paths"); recipe.ErrBadOption for a nil s; recipe.ErrSessionClosed.
func New(s *zookeeper.Session, path string, opts ...BarrierOption) (*Barrier, error) {
	n, err := zookeeper.NewValueNode(s, path)
	if err != nil {
		return nil, err
	}
	b := &Barrier{n: n}
	for _, o := range opts {
		if o != nil {
			o(b)
		}
	}
	return b, nil
}

// Path returns the barrier's znode path (relative to the session's chroot).
func (b *Barrier) Path() string { return b.n.Path() }

// Set raises the barrier: creates its znode (persistent, empty; missing
// parents as containers) unless it exists. A lost reply is settled by
// reading the node. Operations: create, getData. Errors: *recipe.OpError;
// recipe.ErrSessionClosed; ctx's cause (after a send the node may exist:
// Set or Remove again).
func (b *Barrier) Set(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", recipe.ErrBadOption)
	}
	_, err := b.n.Write(ctx, []byte{}, -1)
	if err == nil || errors.Is(err, recipe.ErrConflict) {
		return nil // made now, or there already
	}
	var oe *recipe.OpError
	if errors.As(err, &oe) && ctx.Err() == nil {
		// Unconfirmed: a lost reply, and the node was written since.
		// Whoever wrote it, it exists or was removed after this Set.
		if v, rerr := b.n.Read(ctx); rerr == nil && v.Exists {
			return nil
		}
	}
	return err
}

// Remove lowers the barrier: deletes its znode whatever it holds; a
// barrier not set is no error. Operation: delete. Errors: *recipe.OpError
// (recipe.ErrNoPermission for an ACL refusal); recipe.ErrSessionClosed;
// ctx's cause (after a send the node may be gone: Remove again).
func (b *Barrier) Remove(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", recipe.ErrBadOption)
	}
	return b.n.Delete(ctx)
}

// Wait blocks until the barrier's znode does not exist, and returns nil at
// once if it does not now (a synced read: a Set that returned before Wait
// was called is seen). It follows the node with the Session's shared
// watch (one server watch per path, however many waits come and go) and
// outlives a session loss: the node is persistent and the wait only reads.
// Errors: ctx's cause; recipe.ErrSessionClosed; *recipe.OpError for a read
// retrying cannot cure (an ACL refusal).
func (b *Barrier) Wait(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", recipe.ErrBadOption)
	}
	// A synced read first: a Set that returned before this call (on another
	// session, maybe through another server) is seen, not a lagging
	// server's older state.
	if v, err := b.n.Read(ctx); err != nil || !v.Exists {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the observer and drops its watch registration
	for v := range b.n.Observe(wctx, b.log) {
		if !v.Exists {
			return nil
		}
	}
	// The observer stopped: ctx ended, the Session closed, or a read failed
	// for good (logged). A last read says which, with its error.
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	v, err := b.n.Read(ctx)
	switch {
	case err != nil:
		return err
	case !v.Exists:
		return nil
	}
	return fmt.Errorf("barrier: %s: the watch ended while the barrier was set (see the log)", b.n.Path())
}
