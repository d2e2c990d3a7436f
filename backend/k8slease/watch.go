package k8slease

import (
	"context"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/zkrecipes/zkrecipes/internal/loop"
)

// leaseWatch is a watch of one Lease (a field selector on metadata.name,
// which RBAC authorizes as a request for that one name).
type leaseWatch struct {
	w      watch.Interface
	cancel context.CancelFunc
}

// startWatch watches the lock's Lease from version rv, or returns nil when
// the watch can't be started within attemptTimeout (the caller's timers
// still wake it: a watch is a speed-up, never needed for correctness). A
// watch the API server refuses (403) is said once per Session and lock, at
// Warn; the holder's watchOwn then stops trying.
func (m *Mutex) startWatch(ctx context.Context, rv string) *leaseWatch {
	wctx, cancel := context.WithCancel(ctx)
	t := time.AfterFunc(attemptTimeout(m.s.cfg.duration), cancel)
	w, err := m.leases().Watch(wctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", m.name).String(),
		ResourceVersion: rv,
	})
	if !t.Stop() || err != nil {
		cancel()
		if err == nil {
			w.Stop()
		}
		if apierrors.IsForbidden(err) && m.s.noWatch(m.path) {
			m.s.log.Warn("k8slease: the API server refuses to watch the Lease (the Role needs watch): "+
				"waiters read it instead, every max(lease duration, 5s), and a holder learns of a takeover at its next renewal",
				"lock", m.path, "error", err)
		}
		m.s.log.Debug("k8slease: watch not started", "lock", m.path, "error", err)
		return nil
	}
	return &leaseWatch{w: w, cancel: cancel}
}

// stop ends the watch (nil: nothing to stop).
func (lw *leaseWatch) stop() {
	if lw != nil {
		lw.w.Stop()
		lw.cancel()
	}
}

// next waits for the Lease to change, the time until, poll, or ctx to end.
// A change shown by an event returns the new version (nil if deleted) and
// known; a timer returns !known (read it again); a watch that ended (the
// server closed it, or its version was compacted away) returns ended, and
// !known. lw may be nil (timers only).
func (lw *leaseWatch) next(ctx context.Context, until time.Time, poll time.Duration) (cur *coordv1.Lease, known, ended bool, err error) {
	t := time.NewTimer(min(time.Until(until), poll))
	defer t.Stop()
	var events <-chan watch.Event
	if lw != nil {
		events = lw.w.ResultChan()
	}
	for {
		select {
		case <-ctx.Done():
			return nil, false, false, context.Cause(ctx)
		case <-t.C:
			return nil, false, false, nil
		case ev, ok := <-events:
			if !ok {
				return nil, false, true, nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if l, ok := ev.Object.(*coordv1.Lease); ok {
					return l, true, false, nil
				}
			case watch.Deleted:
				return nil, true, false, nil
			case watch.Error:
				return nil, false, true, nil
			}
		}
	}
}

// watchOwn ends the lease as soon as a watch event shows its Lease deleted
// (recipe.ErrNodeDeleted) or naming another holder. When the watch ends
// (closed by the server, or its version compacted away), it reads the
// Lease and watches again from the newest version that names the holder.
// It returns when the lease context is done.
func (l *lease) watchOwn() {
	ctx := l.Context()
	m := l.m
	for ctx.Err() == nil {
		w := m.startWatch(ctx, l.record().ResourceVersion)
		var ended bool
		for w != nil && !ended && ctx.Err() == nil {
			var cur *coordv1.Lease
			var known bool
			cur, known, ended, _ = w.next(ctx, time.Now().Add(time.Hour), time.Hour)
			switch {
			case !known:
			case cur == nil:
				l.end(deletedError(m.path))
			case holderOf(cur) != l.id:
				l.end(takenError(m.path, holderOf(cur)))
			case durationOf(cur, m.s.cfg.duration) < m.s.cfg.duration:
				l.end(editedError(m.path, durationOf(cur, m.s.cfg.duration)))
			default:
				l.update(cur)
			}
		}
		w.stop()
		if w == nil && m.s.watchRefused(m.path) {
			return // the renewals still find a takeover, every D/6
		}
		if ctx.Err() == nil && !l.recheck(ctx) {
			return
		}
		if w == nil || ended {
			_ = loop.Sleep(ctx, attemptTimeout(m.s.cfg.duration)/2)
		}
	}
}

// noWatch records that watching the Lease of path was refused, and
// reports whether this is the first time (to be said once).
func (s *Session) noWatch(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watchless[path] {
		return false
	}
	s.watchless[path] = true
	return true
}

// watchRefused reports whether watching the Lease of path was refused.
func (s *Session) watchRefused(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watchless[path]
}
