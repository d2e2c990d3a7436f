package leader

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// DefaultTolerance is how long a Health lets a leader function run on
// after its lease ended before it reports the process unhealthy.
const DefaultTolerance = 5 * time.Second

// ErrOverdue is matched by Health.Check's error: a leader function still
// runs more than the tolerance after its lease ended.
var ErrOverdue = errors.New("leader: a leader function runs on after its lease ended")

// Health is a liveness check of Run loops (client-go's HealthzAdaptor): it
// fails while a leader function runs on more than its tolerance after its
// term's lease ended (lost, suspended, expired: ownership in doubt), a
// process that acts as leader without the lock and that a platform should
// restart. A process that does not lead, or whose functions return in time,
// is healthy. One Health serves any number of Runs (WithHealth), and is an
// http.Handler for a liveness probe. The zero value uses DefaultTolerance.
type Health struct {
	tolerance time.Duration

	mu    sync.Mutex
	terms map[*healthTerm]struct{}
}

// healthTerm is one running leader function and when its lease ended.
type healthTerm struct {
	lease recipe.Lease
	ended atomic.Int64 // unix nanos; 0 while the lease is live
}

// NewHealth returns a Health that lets a leader function run tolerance
// after its lease ended (0: DefaultTolerance). Errors: recipe.ErrBadOption
// for a negative tolerance.
func NewHealth(tolerance time.Duration) (*Health, error) {
	if tolerance < 0 {
		return nil, fmt.Errorf("%w: leader: negative health tolerance %v", recipe.ErrBadOption, tolerance)
	}
	if tolerance == 0 {
		tolerance = DefaultTolerance
	}
	return &Health{tolerance: tolerance, terms: map[*healthTerm]struct{}{}}, nil
}

// WithHealth reports Run's terms to h (nil: none), so that h.Check fails
// while a leader function outlives its lease by more than h's tolerance.
func WithHealth(h *Health) Option { return func(c *config) { c.health = h } }

// Tolerance returns the time a leader function may run after its lease
// ended.
func (h *Health) Tolerance() time.Duration {
	if h.tolerance == 0 {
		return DefaultTolerance
	}
	return h.tolerance
}

// Check returns nil, or an error matching ErrOverdue that says by how much
// the longest-running leader function has outlived its lease. A nil
// *Health is healthy.
func (h *Health) Check() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	var worst time.Duration
	for t := range h.terms {
		if t.ended.Load() == 0 && t.lease.Context().Err() != nil {
			t.ended.CompareAndSwap(0, time.Now().UnixNano()) // its AfterFunc has not run yet
		}
		if e := t.ended.Load(); e != 0 {
			worst = max(worst, now.Sub(time.Unix(0, e)))
		}
	}
	if tol := h.Tolerance(); worst > tol {
		ceil := (worst + time.Millisecond - 1).Truncate(time.Millisecond) // never shown as the tolerance itself
		return fmt.Errorf("%w: for %v (tolerance %v)", ErrOverdue, ceil, tol)
	}
	return nil
}

// ServeHTTP answers a liveness probe: 200 "ok", or 503 with Check's error
// (durations only: no lock name, token or cause).
func (h *Health) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := h.Check(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// Track registers work done as leader on lease, by code that is not a Run
// loop (a latch's Await, a plain Acquire, a multilock), until the returned
// done is called: Check fails while that work outlives lease by more than
// the tolerance. Run calls it for each term. Call done once the work has
// stopped; a nil *Health, or a nil lease, tracks nothing.
func (h *Health) Track(lease recipe.Lease) (done func()) {
	if h == nil || lease == nil {
		return func() {}
	}
	t := &healthTerm{lease: lease}
	stop := context.AfterFunc(lease.Context(), func() { t.ended.CompareAndSwap(0, time.Now().UnixNano()) })
	h.mu.Lock()
	if h.terms == nil {
		h.terms = map[*healthTerm]struct{}{}
	}
	h.terms[t] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			stop()
			h.mu.Lock()
			delete(h.terms, t)
			h.mu.Unlock()
		})
	}
}
