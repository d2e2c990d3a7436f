package etcdlock

import (
	"context"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// lease is one grant of a Mutex: the key key, created at revision rev under
// the etcd lease of generation g.
type lease struct {
	s      *Session
	g      *generation
	key    string
	rev    int64
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	released bool // the delete was confirmed
}

var _ recipe.Lease = (*lease)(nil)

// newLease makes the Lease of a granted attempt. Its context keeps the
// values of acquireCtx, not its cancellation, and ends when the etcd lease
// is lost, with the loss's cause (generation.lose ends it; if the etcd lease
// is lost already, it ends at once).
func newLease(a *attempt, acquireCtx context.Context) *lease {
	l := &lease{s: a.m.s, g: a.g, key: a.key, rev: a.rev}
	l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(acquireCtx))
	g := a.g
	g.mu.Lock()
	if g.ctx.Err() != nil {
		l.cancel(context.Cause(g.ctx))
	} else {
		g.leases[l] = struct{}{}
	}
	g.mu.Unlock()
	return l
}

// end ends the lease context with cause (the first cause wins) and forgets
// the lease in its generation.
func (l *lease) end(cause error) {
	l.cancel(cause)
	l.g.mu.Lock()
	delete(l.g.leases, l)
	l.g.mu.Unlock()
}

// Token returns the create revision of the lease's key: etcd's revision
// counter only grows, so it is larger than the token of every earlier grant
// of the lock (of any lock on the cluster, in fact).
func (l *lease) Token() fence.Token { return fence.Token(l.rev) }

// Context is done as soon as ownership is released or in doubt; see
// recipe.Lease. Causes: recipe.ErrReleased, recipe.ErrSuspended (no
// keep-alive acknowledged in time), recipe.ErrSessionLost (the server said
// the etcd lease is gone), recipe.ErrSessionClosed, recipe.ErrNodeDeleted
// (the key was deleted by someone else).
func (l *lease) Context() context.Context { return l.ctx }

// Release gives the lock up: it ends the lease context (cause
// recipe.ErrReleased), then deletes the key in one transaction that
// compares its create revision with the lease's, so a retried Release can
// never delete a later incarnation of the key (etcd issue 22082 is that bug
// in etcd's own concurrency package). The delete is sent even if ctx is
// already done and retried on transient errors until ctx ends or the
// cleanup timeout (default: the TTL) passes; a delete not confirmed by then
// is also retried in the background while the etcd lease lives.
//
// It is idempotent and can be retried after an error; concurrent calls are
// serialized. Errors: recipe.ErrLeaseLost (wrapping the cause) if ownership
// ended before Release (nothing is deleted then: the key is gone, or goes
// with the lost etcd lease); a *recipe.OpError if the delete could not be
// confirmed.
func (l *lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	l.end(recipe.ErrReleased)
	if cause := context.Cause(l.ctx); cause != recipe.ErrReleased {
		return fmt.Errorf("%w (%w)", recipe.ErrLeaseLost, cause)
	}
	if err := l.s.deleteOwned(ctx, l.g, l.key, l.rev); err != nil {
		l.s.deleteLater(l.g, l.key, l.rev)
		return err
	}
	l.released = true
	return nil
}

// watchOwn ends the lease context with recipe.ErrNodeDeleted when the key is
// deleted while the lease is live. It watches the key from the revision after
// its creation; when the watch ends without a deletion (compaction, no
// leader), it reads the key and watches again from the read's revision. It
// returns when the lease context is done.
func (l *lease) watchOwn() {
	ctx := clientv3.WithRequireLeader(l.ctx)
	cli := l.s.cli
	rev := l.rev + 1
	for try := 0; l.ctx.Err() == nil; {
		wctx, cancel := context.WithCancel(ctx)
		deleted := false
		for wr := range cli.Watch(wctx, l.key, clientv3.WithRev(rev), clientv3.WithFilterPut()) {
			for _, ev := range wr.Events {
				deleted = deleted || ev.Type == clientv3.EventTypeDelete
			}
			if deleted || wr.Err() != nil || wr.Canceled {
				break
			}
		}
		cancel()
		if deleted {
			l.lostKey(ctx)
			return
		}
		resp, err := cli.Get(ctx, l.key, clientv3.WithKeysOnly())
		switch {
		case l.ctx.Err() != nil:
			return
		case err != nil:
			sleep(l.ctx, backoff(try))
			try++
		case len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.rev:
			l.lostKey(ctx)
			return
		default:
			rev, try = resp.Header.Revision+1, 0
		}
	}
}

// lostKey ends the lease context after its key vanished: with the etcd
// lease's loss if the lease went (and the key with it), else with
// recipe.ErrNodeDeleted.
func (l *lease) lostKey(ctx context.Context) {
	if l.g.gone(ctx) {
		return // lose ended the lease with the etcd lease's loss
	}
	l.end(fmt.Errorf("%w: %s", recipe.ErrNodeDeleted, l.key))
}
