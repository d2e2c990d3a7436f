// Package grant is what every backend's Lease shares, written once: the
// lease core (the fencing token, the context that ends when ownership
// does, with the cause of the first end, the report of a loss, and the
// serialized, idempotent Release of recipe.Lease) and the ownership
// deadline (Deadline). A backend keeps only its storage protocol: how a
// grant is made, kept alive and removed.
package grant

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Reporter is where a Core reports the end of its lease: the backend's
// logger and Metrics (nil for none), and the names Metrics and the log
// line use. Kind is the recipe's node kind without its dash ("lock" for
// every backend's mutex); Dir is the lock's name or directory.
type Reporter struct {
	Log     *slog.Logger // nil: slog.Default()
	Metrics recipe.Metrics
	Backend string // the package logging: "zookeeper", "etcdlock", ...
	Kind    string
	Dir     string
}

// Core is the part of a Lease that every backend shares. Embed it (by
// value, after calling Init) and implement Release with Core.Release.
type Core struct {
	token  fence.Token
	delay  time.Duration // the lock-delay this grant served (SetDelayServed)
	rep    *Reporter
	ctx    context.Context
	cancel context.CancelCauseFunc
	endMu  sync.Mutex  // makes End's check and cancel one step
	ended  atomic.Bool // set after the cancel, under endMu
	onEnd  []func()    // whenEnded's, run by End; under endMu

	mu       sync.Mutex // serializes Release
	released bool       // the removal completed, or nothing is left to remove
}

// Init sets the core of a grant with token; its context keeps the values of
// acquireCtx, not its cancellation. rep may be nil (nothing reported).
func (c *Core) Init(acquireCtx context.Context, token fence.Token, rep *Reporter) {
	c.token, c.rep = token, rep
	c.ctx, c.cancel = context.WithCancelCause(context.WithoutCancel(acquireCtx))
}

// Token returns the grant's fencing token.
func (c *Core) Token() fence.Token { return c.token }

// SetToken replaces the token of a grant whose token is known only after
// its core was made (before the lease is handed to anyone).
func (c *Core) SetToken(t fence.Token) { c.token = t }

// Context is done as soon as ownership is released or in doubt;
// context.Cause tells why.
func (c *Core) Context() context.Context { return c.ctx }

// Live reports whether the lease has not ended; once it reports false,
// context.Cause is set.
func (c *Core) Live() bool { return !c.ended.Load() }

// End ends the lease with cause unless it has ended already (the first
// cause wins), and reports whether this call ended it. A loss (any cause
// but recipe.ErrReleased) is reported: logged at WARN with the cause
// (DEBUG for recipe.ErrSessionClosed, which the program asked for), and
// given to Metrics.LeaseLost. When any End returns, the context is done
// with its cause, whichever call set it. End may be called under the
// backend's locks: it takes only a leaf lock of its own, and the Metrics
// contract forbids calling back.
func (c *Core) End(cause error) bool {
	c.endMu.Lock()
	if c.ended.Load() {
		c.endMu.Unlock()
		return false
	}
	c.cancel(cause)
	c.ended.Store(true)
	fs := c.onEnd
	c.onEnd = nil
	c.endMu.Unlock()
	for _, f := range fs {
		f()
	}
	if c.rep != nil && cause != recipe.ErrReleased {
		c.rep.lost(c.token, cause)
	}
	return true
}

// whenEnded runs f once the lease has ended: from the End that ends it,
// before that End returns, or at once if it has ended already.
func (c *Core) whenEnded(f func()) {
	c.endMu.Lock()
	if !c.ended.Load() {
		c.onEnd = append(c.onEnd, f)
		c.endMu.Unlock()
		return
	}
	c.endMu.Unlock()
	f()
}

// lost reports the loss of the grant with token.
func (r *Reporter) lost(token fence.Token, cause error) {
	if r.Metrics != nil {
		r.Metrics.LeaseLost(r.Kind, r.Dir, cause)
	}
	log, level := r.Log, slog.LevelWarn
	if log == nil {
		log = slog.Default()
	}
	if errors.Is(cause, recipe.ErrSessionClosed) {
		level = slog.LevelDebug
	}
	log.Log(context.Background(), level, r.Backend+": lease lost", "lock", shortpath.Of(r.Dir), "token", int64(token), "cause", cause)
}

// Release is recipe.Lease's Release, idempotent and serialized, given the
// backend's two steps: end ends the lease with recipe.ErrReleased if live
// (the backend's bookkeeping around Core.End); remove removes the grant,
// run only if this Release ended the lease, and reports done when nothing
// is left to remove even with an error (an unlock on a connection then
// closed), so a later Release returns nil. It returns nil once the grant
// is removed, an error matching recipe.ErrLeaseLost and wrapping the cause
// if the lease had ended before (nothing removed), or remove's error.
func (c *Core) Release(ctx context.Context, end func(), remove func(context.Context) (done bool, err error)) error {
	if ctx == nil { // a deferred cleanup: remove the grant, do not panic half way
		ctx = context.Background()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return nil
	}
	end()
	if cause := context.Cause(c.ctx); cause != recipe.ErrReleased {
		return lostError{cause}
	}
	done, err := remove(ctx)
	c.released = done || err == nil
	return err
}

// lostError is Release's error for a lease that had ended: it matches
// recipe.ErrLeaseLost and the cause, and names the module once
// ("recipe: lease lost (connection suspended: ...)").
type lostError struct{ cause error }

func (e lostError) Error() string {
	return recipe.ErrLeaseLost.Error() + " (" + strings.TrimPrefix(e.cause.Error(), "recipe: ") + ")"
}

func (e lostError) Unwrap() []error { return []error{recipe.ErrLeaseLost, e.cause} }

// Attempt is one acquisition being measured (Begin): the one place every
// backend and leader.Run reports AcquireStarted and AcquireDone.
type Attempt struct {
	m         recipe.Metrics
	kind, dir string
	start     time.Time
}

// Begin reports an acquisition of kind on dir started to m (nil: nothing,
// at no cost); the caller reports its end with Done.
func Begin(m recipe.Metrics, kind, dir string) Attempt {
	if m == nil {
		return Attempt{}
	}
	m.AcquireStarted(kind, dir)
	return Attempt{m: m, kind: kind, dir: dir, start: time.Now()}
}

// Done reports the acquisition's end with err and how long it took, and a
// grant (l, when err is nil) to a recipe.HoldingMetrics: +1 now, -1 when l
// ends (from the End that ends a Core, before a Release returns).
func (a Attempt) Done(l recipe.Lease, err error) {
	if a.m == nil {
		return
	}
	a.m.AcquireDone(a.kind, a.dir, time.Since(a.start), err)
	hm, ok := a.m.(recipe.HoldingMetrics)
	if !ok || err != nil || l == nil {
		return
	}
	token := l.Token()
	hm.Holding(a.kind, a.dir, token, +1)
	end := func() { hm.Holding(a.kind, a.dir, token, -1) }
	if c, ok := l.(interface{ whenEnded(func()) }); ok {
		c.whenEnded(end) // a backend's lease: -1 before its Release returns
	} else {
		context.AfterFunc(l.Context(), end)
	}
}
