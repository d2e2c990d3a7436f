package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// deleteOwned deletes key if its create revision is still rev: one
// transaction comparing the create revision, so that no retry can delete a
// newer key of the same name (etcd issue 22082). It ignores ctx's
// cancellation for the first try, and retries transient errors until ctx
// ends, the cleanup timeout passes or g's etcd lease is lost (the key goes
// with it: nil if the server said the lease is gone, else an error saying
// the key goes with the lease). A try unanswered within attemptTimeout is
// sent again at once, whatever ctx, within the cleanup timeout. also are
// operations of the same transaction, applied with the delete (the
// lock-delay's record: releaseOps). rev 0 deletes key if it is under g's
// etcd lease: an attempt's key whose put may have been applied, its answer
// lost (the name is the attempt's own GUID).
func (s *Session) deleteOwned(ctx context.Context, g *generation, key string, rev int64, also ...clientv3.Op) error {
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cleanupTimeout())
	defer cancel()
	bctx, cancel2 := s.life.Bind(bctx)
	defer cancel2()
	bctx, cancel3 := g.bind(bctx)
	defer cancel3()
	b := loop.BackOff(retryFirst, retryMax)
	own := clientv3.Compare(clientv3.CreateRevision(key), "=", rev)
	if rev == 0 { // an incarnation never learned (a put whose answer was lost): the key if under g's lease
		own = clientv3.Compare(clientv3.LeaseValue(key), "=", g.id)
	}
	del := func(ctx context.Context) error {
		_, err := s.cli.Txn(ctx).If(own).
			Then(append([]clientv3.Op{clientv3.OpDelete(key)}, also...)...).Commit()
		return err
	}
	for {
		unanswered, err := try(bctx, attemptTimeout(g.ttl), del)
		switch {
		case err == nil || goneWithLease(g):
			return nil // deleted now, or not there any more
		case g.ctx.Err() != nil:
			return opError("delete", key, fmt.Errorf("the key goes with its etcd lease (%w): %w", context.Cause(g.ctx), err))
		case unanswered:
			// Sent to a silent member, most likely: send it again at once,
			// within the cleanup timeout even when ctx is done.
			continue
		case !transient(err) || bctx.Err() != nil || ctx.Err() != nil:
			return opError("delete", key, err)
		}
		s.log.Debug("etcdlock: delete failed, retrying", "key", key, "error", err)
		if loop.Pause(bctx, b, retryMax) != nil || ctx.Err() != nil {
			return opError("delete", key, err)
		}
	}
}

// deleteLater retries deleteOwned in the background until it succeeds, the
// key's lease is lost (its keys go with it) or the Session closes.
func (s *Session) deleteLater(g *generation, key string, rev int64, also ...clientv3.Op) {
	s.life.Go(func() {
		ctx, cancel := s.life.Bind(g.ctx)
		defer cancel()
		b := loop.BackOff(retryFirst, retryMax)
		for {
			if s.deleteOwned(ctx, g, key, rev, also...) == nil || ctx.Err() != nil {
				return
			}
			if loop.Pause(ctx, b, retryMax) != nil {
				return
			}
		}
	})
}

// goneWithLease reports whether the server said g's lease is gone (and with
// it every key put under it).
func goneWithLease(g *generation) bool {
	return g.ctx.Err() != nil && errors.Is(context.Cause(g.ctx), recipe.ErrSessionLost)
}

// The retry waits of every request this package retries: from retryFirst,
// doubling up to retryMax, randomized (internal/loop).
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = time.Second
)
