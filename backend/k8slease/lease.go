package k8slease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// lease is one grant of a Mutex: the Lease names id as its holder since
// the write whose resourceVersion is the token. Its context's causes:
// recipe.ErrReleased, recipe.ErrSuspended (no renewal acknowledged in
// time), recipe.ErrNodeDeleted (the Lease was deleted, or names another
// holder), a *PermissionError (a renewal refused), recipe.ErrSessionClosed.
type lease struct {
	grant.Core
	m  *Mutex
	id string
	dl *grant.Deadline

	mu  sync.Mutex
	cur *coordv1.Lease // the newest version known to name id
}

var _ recipe.Lease = (*lease)(nil)

// errLate is start's error for a grant whose deadline had passed.
var errLate = errors.New("k8slease: granted after the ownership deadline")

// span is the ownership deadline's: 2/3 of the lease duration after the
// send of the newest acknowledged write. A contender takes the Lease over
// no sooner than a full duration after it saw that write's version, which
// it can only see after the write was sent; the last third is the margin
// for a late timer and for clock rates.
func span(d time.Duration) time.Duration { return d * 2 / 3 }

// newLease makes the grant of obj to id, written by a request sent at
// sent; its context keeps the values of acquireCtx, not its cancellation.
func newLease(acquireCtx context.Context, m *Mutex, id string, obj *coordv1.Lease, token fence.Token, sent time.Time) *lease {
	l := &lease{m: m, id: id, cur: obj}
	l.Init(acquireCtx, token, m.rep)
	l.dl = grant.NewDeadline(sent, span(m.s.cfg.duration), func() {
		if l.end(fmt.Errorf("%w: no renewal of Lease %s acknowledged within %v of its send",
			recipe.ErrSuspended, m.path, span(m.s.cfg.duration))) {
			// Ownership is given up: clear the Lease once the server can be
			// reached again, so the next holder need not wait out D.
			m.clearLater(id)
		}
	})
	return l
}

// start registers the lease with its Session and starts its renewals and
// its watch: errLate if its deadline has passed, recipe.ErrSessionClosed
// after Close.
func (l *lease) start() error {
	s := l.m.s
	if l.dl.Check() {
		return errLate
	}
	if !s.register(l) {
		l.dl.Stop()
		return recipe.ErrSessionClosed
	}
	if !s.life.Go(l.keep) || !s.life.Go(l.watchOwn) {
		l.end(recipe.ErrSessionClosed) // Close clears the Lease
	}
	return nil
}

// end ends the lease with cause (the first cause wins) and reports whether
// this call ended it.
func (l *lease) end(cause error) bool {
	if !l.End(cause) {
		return false
	}
	l.dl.Stop()
	l.m.s.forget(l)
	return true
}

// record returns the newest version known to name the holder.
func (l *lease) record() *coordv1.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// update records obj, a version that names the holder, if newer.
func (l *lease) update(obj *coordv1.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a, errA := tokenOf(obj.ResourceVersion); errA == nil {
		if b, errB := tokenOf(l.cur.ResourceVersion); errB != nil || a > b {
			l.cur = obj
		}
	}
}

// Release gives the lock up: it ends the lease context (cause
// recipe.ErrReleased), then writes the Lease with no holder, in an update
// the API server applies only to the version last known to name this
// holder (a later version that still names it, after a renewal's lost
// answer, is read and updated in turn; one naming another holder is left
// alone). The update is sent even if ctx is already done and retried on
// transient errors until ctx ends or the cleanup timeout (default: the
// lease duration) passes; an update not confirmed by then goes on in the
// background for up to twice the duration, after which a contender has
// taken the Lease over anyway.
//
// It is idempotent and can be retried after an error; concurrent calls are
// serialized. Errors: recipe.ErrLeaseLost (wrapping the cause) if
// ownership ended before Release (nothing is written then); a
// *recipe.OpError if the update could not be confirmed.
func (l *lease) Release(ctx context.Context) error {
	return l.Core.Release(ctx, func() { l.end(recipe.ErrReleased) }, l.remove)
}

// remove clears the Lease of a released grant; what it could not confirm
// goes on in the background.
func (l *lease) remove(ctx context.Context) (bool, error) {
	m := l.m
	t := m.s.cfg.cleanupTimeout
	if t == 0 {
		t = m.s.cfg.duration
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t)
	defer cancel()
	if err := m.clear(cctx, l.id, l.record()); err != nil {
		m.clearLater(l.id)
		return false, err
	}
	return true, nil
}

// keep renews the Lease every sixth of its duration until the lease ends:
// an update of renewTime and of the TokenAnnotation (the grant's token)
// based on the newest version known to name the holder, each try bounded
// by the ownership deadline and by attemptTimeout; an acknowledged one
// moves the deadline to its send time plus span. A refused update (409)
// reads the Lease: another holder named, or the Lease gone, ends the lease
// at once (recipe.ErrNodeDeleted); this holder still named (a lost answer
// of ours was applied) renews from that version. A renewal the API
// server's authorization refuses (403) ends the lease at once with a
// *PermissionError (recipe.ErrNoPermission), which its loss's log line
// shows.
func (l *lease) keep() {
	ctx := l.Context()
	m := l.m
	every := m.s.cfg.duration / 6
	retry := min(every/4, 250*time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(ctx, earliest(l.dl.At(), sent.Add(attemptTimeout(m.s.cfg.duration))))
		obj, err := m.leases().Update(rctx, stamped(renewed(l.record(), sent, m.s.cfg.duration), l.Token()), metav1.UpdateOptions{})
		cancel()
		next := every
		switch {
		case err == nil:
			l.dl.Ack(sent)
			l.update(obj)
		case ctx.Err() != nil:
			return
		case apierrors.IsNotFound(err):
			l.end(deletedError(m.path))
			return
		case apierrors.IsConflict(err):
			if !l.recheck(ctx) {
				return
			}
			next = 0
		case apierrors.IsForbidden(err):
			// The Role lost update: no renewal will pass, and no clear either
			// (the Lease stays named until a contender takes it over).
			l.end(m.refused("update", err))
			return
		default:
			m.s.log.Debug("k8slease: renewal failed", "lock", m.path, "error", err)
			next = retry
		}
		t.Reset(next)
	}
}

// recheck reads the Lease after a refused renewal and reports whether the
// holder is still named (its version recorded), ending the lease if not.
func (l *lease) recheck(ctx context.Context) bool {
	m := l.m
	tctx, cancel := context.WithDeadline(ctx, earliest(l.dl.At(), time.Now().Add(attemptTimeout(m.s.cfg.duration))))
	defer cancel()
	cur, err := m.leases().Get(tctx, m.name, metav1.GetOptions{})
	switch {
	case err == nil && holderOf(cur) == l.id:
		l.update(cur)
		return true
	case err == nil:
		l.end(takenError(m.path, holderOf(cur)))
		return false
	case apierrors.IsNotFound(err):
		l.end(deletedError(m.path))
		return false
	}
	return ctx.Err() == nil // unanswered: the next renewal tries again
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
