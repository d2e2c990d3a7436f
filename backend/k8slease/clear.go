package k8slease

import (
	"context"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/zkrecipes/zkrecipes/internal/loop"
)

// clear gives up the Lease if, and only if, it still names id: an update
// to no holder (as client-go's ReleaseOnCancel writes it), refused by the
// API server if the Lease changed since the version it is based on. cur
// is the newest version known to name id (nil: read it first). A refusal
// reads the Lease again: if another holder is named, or the Lease is gone,
// nothing is ours to clear (nil). Transient errors are retried until ctx
// ends; the error returned is the last one, as a *recipe.OpError.
func (m *Mutex) clear(ctx context.Context, id string, cur *coordv1.Lease) error {
	b := loop.BackOff(retryFirst, retryMax)
	for {
		var err error
		if cur == nil {
			if cur, err = m.read(ctx); err != nil {
				return opError("release", m.path, err)
			}
		}
		if holderOf(cur) != id {
			return nil
		}
		tctx, cancel := context.WithTimeout(ctx, attemptTimeout(m.s.cfg.duration))
		_, err = m.leases().Update(tctx, released(cur, time.Now()), metav1.UpdateOptions{})
		cancel()
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			cur = nil // changed: by us (a renewal's lost answer) or by someone else
			continue
		case !transient(err) || ctx.Err() != nil:
			return opError("release", m.path, err)
		}
		// Unanswered: it may have been applied; the next try's conflict
		// would tell (and the read after it).
		cur = nil
		m.s.log.Debug("k8slease: release failed, retrying", "lock", m.path, "error", err)
		if loop.Pause(ctx, b, retryMax) != nil {
			return opError("release", m.path, err)
		}
	}
}

// cleanupContext is the context of a cleanup after ctx (a caller's): not
// cancelled with it, bounded by the cleanup timeout, ended by Close (which
// clears what its leases hold itself).
func (m *Mutex) cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	t := m.s.cfg.cleanupTimeout
	if t == 0 {
		t = m.s.cfg.duration
	}
	return context.WithTimeout(context.WithoutCancel(ctx), t)
}

// clearLater goes on clearing the Lease for id in the background, until it
// is cleared or another holder is named, twice the lease duration has
// passed (a contender has taken it over by then), or the Session closes.
func (m *Mutex) clearLater(id string) {
	s := m.s
	s.life.Go(func() {
		ctx, cancel := s.life.Bind(context.Background())
		defer cancel()
		ctx, cancel2 := context.WithTimeout(ctx, 2*s.cfg.duration)
		defer cancel2()
		b := loop.BackOff(retryFirst, retryMax)
		for m.clear(ctx, id, nil) != nil && ctx.Err() == nil {
			if loop.Pause(ctx, b, retryMax) != nil {
				return
			}
		}
	})
}
