package etcdlock

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// lease is one grant of a Mutex: the key key, created at revision rev (the
// token) under the etcd lease of generation g. Its context's causes:
// recipe.ErrReleased, recipe.ErrSuspended (no keep-alive acknowledged in
// time), recipe.ErrSessionLost (the server said the etcd lease is gone),
// recipe.ErrSessionClosed, recipe.ErrNodeDeleted (the key was deleted by
// someone else).
type lease struct {
	grant.Core
	s    *Session
	g    *generation
	key  string
	rev  int64
	also []clientv3.Op // deleted with the key by Release: the lock-delay's record
}

var _ recipe.Lease = (*lease)(nil)

// newLease makes the Lease of a granted attempt (its token is the key's
// create revision, which only grows); its context keeps the values of
// acquireCtx, not its cancellation.
func newLease(a *attempt, acquireCtx context.Context) *lease {
	l := &lease{s: a.m.s, g: a.g, key: a.key, rev: a.rev, also: a.m.releaseOps(a.key)}
	l.Init(acquireCtx, fence.Token(a.rev), a.m.rep)
	return l
}

// end ends the lease with cause (the first cause wins) and forgets it in
// its generation.
func (l *lease) end(cause error) {
	if l.End(cause) {
		l.g.forget(l)
	}
}

// Release gives the lock up: it ends the lease context (cause
// recipe.ErrReleased), then deletes the key in one transaction that
// compares its create revision with the lease's, so a retried Release can
// never delete a later incarnation of the key (etcd issue 22082 is that bug
// in etcd's own concurrency package); with WithLockDelay, the same
// transaction deletes the record of the grant, which makes the end a clean
// one (no delay for the next holder). The delete is sent even if ctx is
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
	return l.Core.Release(ctx, func() { l.end(recipe.ErrReleased) }, l.remove)
}

// remove deletes the key of a released lease; what it could not confirm
// goes on in the background.
func (l *lease) remove(ctx context.Context) (bool, error) {
	if err := l.s.deleteOwned(ctx, l.g, l.key, l.rev, l.also...); err != nil {
		l.s.deleteLater(l.g, l.key, l.rev, l.also...)
		return false, err
	}
	return true, nil
}

// watchOwn ends the lease context with recipe.ErrNodeDeleted when the key is
// deleted while the lease is live. It watches the key from the revision after
// its creation; when the watch ends without a deletion (compaction, no
// leader, silence past silentWatchLimit), it reads the key (Session.retry)
// and watches again from the read's revision. It returns when the lease
// context is done.
func (l *lease) watchOwn() {
	ctx := clientv3.WithRequireLeader(l.Context())
	for rev := l.rev + 1; ; {
		if l.deletedFrom(ctx, rev) {
			l.lostKey(ctx)
			return
		}
		var resp *clientv3.GetResponse
		err := l.s.retry(ctx, l.g, "get", l.key, func(ctx context.Context) (err error) {
			resp, err = l.s.cli.Get(ctx, l.key, clientv3.WithKeysOnly())
			return err
		})
		switch {
		case ctx.Err() != nil:
			return
		case err != nil: // refused: watch again from rev after a pause
			if loop.Sleep(ctx, retryMax) != nil {
				return
			}
			continue
		case len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.rev:
			l.lostKey(ctx)
			return
		}
		rev = resp.Header.Revision + 1
	}
}

// deletedFrom watches l's key from revision rev and reports whether it saw
// the key deleted; it returns false when the watch ends otherwise
// (compaction, no leader, ctx's end) or stays silent past silentWatchLimit,
// for the caller to read the key again.
func (l *lease) deletedFrom(ctx context.Context, rev int64) bool {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	silent := time.NewTimer(silentWatchLimit(l.g.ttl))
	defer silent.Stop()
	ch := l.s.cli.Watch(wctx, l.key, clientv3.WithRev(rev), clientv3.WithFilterPut())
	for {
		select {
		case wr, ok := <-ch:
			if !ok || wr.Err() != nil || wr.Canceled {
				return false
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					return true
				}
			}
		case <-silent.C:
			return false
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
