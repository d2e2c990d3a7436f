package leader

import (
	"context"
	"sync/atomic"

	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// WithMetrics reports Run's events to m (default nil: none) with kind
// "leader" and dir name: AcquireStarted and AcquireDone for every attempt to
// take the lock; LeaseLost with the lease's cause when a term ends because
// the lease was lost (not when fn returns or ctx ends); and, if m implements
// LeadingMetrics, Leading +1 and -1 around every term. The lock's backend
// reports Waiting and SessionState with its own WithMetrics; StaleRejected
// belongs to the fence.Guard (docs/metrics.md).
func WithMetrics(m recipe.Metrics, name string) Option {
	return func(c *config) { c.metrics, c.name = m, name }
}

// LeadingMetrics is an optional extension of the Metrics of WithMetrics,
// told when this process leads (client-go's leader_election_master_status;
// recipe/prommetrics's zkrecipes_leading).
type LeadingMetrics interface {
	// Leading is called with +1 when a term starts (on Run's goroutine,
	// before fn runs) and -1 when fn's context ends or fn returns, whichever
	// comes first (on a goroutine that Run waits for before it releases the
	// lease). Summed over every process it is 1 while someone leads.
	Leading(name string, delta int)
}

// kindLeader is the kind of every event of Run.
const kindLeader = "leader"

// acquire is one attempt to take lock, reported to the metrics.
func (c *config) acquire(ctx context.Context, lock recipe.Lock) (recipe.Lease, error) {
	a := grant.Begin(c.metrics, kindLeader, c.name)
	l, err := lock.Acquire(ctx)
	a.Done(l, err)
	return l, err
}

// term reports the end of one term to the metrics; nil without metrics.
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
