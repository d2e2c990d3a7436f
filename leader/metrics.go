package leader

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// WithMetrics reports Run's events to m (nil: none, the default), with
// kind "leader" and dir name (the election's name; a lock's name is a good
// one):
//
//   - AcquireStarted and AcquireDone for every attempt to take the lock,
//     with the time it took and Acquire's error (nil for a grant; ctx's
//     cause when Run was stopped while waiting);
//   - LeaseLost with the lease's cause (an error matching
//     recipe.ErrSuspended, recipe.ErrSessionLost, recipe.ErrNodeDeleted,
//     ...) when a term ends because the lease was lost; not when fn
//     returns or ctx ends;
//   - if m also implements LeadingMetrics, Leading +1 and -1 around every
//     term.
//
// Waiting and SessionState are not called: the lock's backend reports its
// waiters and its session with its own WithMetrics (kind "lock"); nor is
// StaleRejected, which belongs to the resource's fence.Guard. One m can
// serve the backend and Run at once.
func WithMetrics(m recipe.Metrics, name string) Option {
	return func(c *config) { c.metrics, c.name = m, name }
}

// LeadingMetrics is an optional extension of the recipe.Metrics given to
// WithMetrics: a Metrics that also implements it is told when this process
// leads, as client-go's leader election exports leader_election_master_status
// (package recipe/zkprom exports it as zkrecipes_leading).
type LeadingMetrics interface {
	// Leading is called with delta +1 when a term starts (the lock was
	// granted; fn is about to run), on Run's goroutine, and with delta -1
	// when it ends: when fn's context ends (the lease was lost or Run's
	// ctx ended) or fn returns, whichever comes first, on a goroutine of
	// its own that Run waits for before it releases the lease. The sum of
	// deltas per name is the number of this process's Run loops of that
	// name that lead. Summed over every process it is 1 while someone
	// leads: a holder learns of its loss before another is granted, so
	// only a paused process's stale value can make it 2.
	Leading(name string, delta int)
}

// kindLeader is the kind of every event of Run.
const kindLeader = "leader"

// acquire is one attempt to take lock, reported to the metrics.
func (c *config) acquire(ctx context.Context, lock recipe.Lock) (recipe.Lease, error) {
	m := c.metrics
	if m == nil {
		return lock.Acquire(ctx)
	}
	m.AcquireStarted(kindLeader, c.name)
	start := time.Now()
	l, err := lock.Acquire(ctx)
	m.AcquireDone(kindLeader, c.name, time.Since(start), err)
	return l, err
}

// term reports the end of one leadership to the metrics. Its methods do
// nothing on a nil term (no metrics).
type term struct {
	byRun    atomic.Bool   // Run ended fn's context (ctx ended, or fn returned), not the lease
	reported chan struct{} // closed once the end was reported
}

// startTerm reports the start of a term whose fn runs on fctx, and reports
// its end when fctx ends: LeaseLost with fctx's cause, unless Run ended it
// (endsIt), then Leading -1. It returns nil without metrics.
func (c *config) startTerm(fctx context.Context) *term {
	if c.metrics == nil {
		return nil
	}
	t := &term{reported: make(chan struct{})}
	lm, _ := c.metrics.(LeadingMetrics)
	if lm != nil {
		lm.Leading(c.name, +1)
	}
	context.AfterFunc(fctx, func() {
		defer close(t.reported)
		if !t.byRun.Load() {
			c.metrics.LeaseLost(kindLeader, c.name, context.Cause(fctx))
		}
		if lm != nil {
			lm.Leading(c.name, -1)
		}
	})
	return t
}

// endsIt is called by Run just before it ends fctx itself: if fctx is
// still live, the term ends by Run, not by the loss of the lease.
func (t *term) endsIt(fctx context.Context) {
	if t != nil && fctx.Err() == nil {
		t.byRun.Store(true)
	}
}

// wait waits until the end of the term was reported (fctx has ended).
func (t *term) wait() {
	if t != nil {
		<-t.reported
	}
}
