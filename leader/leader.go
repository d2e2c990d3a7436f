// Package leader runs a function only while the caller holds a lock, on any
// backend: the leader-gated loop of Curator's LeaderSelector (with
// autoRequeue), over a recipe.Lock. Run acquires the lock, runs fn with the
// grant's fencing token and a context that ends when the grant does,
// releases the lock when fn returns, backs off, and acquires again, until
// the caller stops it.
//
// The lock can come from any backend: package mutex (ZooKeeper), the
// modules under backend/ (etcd, PostgreSQL, Redis), or package
// recipe/memlock in unit tests, so one piece of service code runs on each:
//
//	m, err := etcdlock.New(s, "scheduler") // or mutex.New, pglock.New, redislock.New, memlock.New
//	if err != nil { return err }
//	err = leader.Run(ctx, m, func(ctx context.Context, token fence.Token) error {
//		return runScheduler(ctx, token) // ctx ends the moment leadership is in doubt
//	})
//	if ctx.Err() != nil {
//		return nil // stopped by us: err is context.Cause(ctx)
//	}
//	return err // an error retrying cannot cure (recipe.Permanent)
//
// WithMetrics reports each attempt and each lost term to a recipe.Metrics
// (recipe/zkprom exports them to Prometheus). election.Run is this loop
// over a ZooKeeper election that also publishes a value (a leader's
// address, say) for others to read.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// MaxBackOff is the longest wait of Run's default backoff, and the wait when
// a policy of WithBackOff returns backoff.Stop.
const MaxBackOff = 5 * time.Second

// Option configures Run.
type Option func(*config)

type config struct {
	backoff   func() backoff.BackOff
	log       *slog.Logger
	permanent []error
	metrics   recipe.Metrics // WithMetrics; nil: none
	name      string         // WithMetrics' dir
}

// WithBackOff sets the backoff Run waits between acquisitions: after a failed
// Acquire, after fn returned an error while leading, and (reset first) after
// every other end of leadership. newBackOff is called once per Run call. The
// policy never ends Run (ctx does, or an error that retrying cannot cure: see
// Run): when it returns backoff.Stop, Run waits MaxBackOff. Default:
// exponential from 100 ms to MaxBackOff, randomized by ±50 %, without a total
// limit. A nil newBackOff means the default.
func WithBackOff(newBackOff func() backoff.BackOff) Option {
	return func(c *config) { c.backoff = newBackOff }
}

// WithLogger sets the logger of Run's warnings: failed acquisitions, errors
// of fn, failed releases (default slog.Default(); add the lock's name with
// logger.With). A nil logger means the default.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithPermanent adds errors that end Run when an Acquire fails with one of
// them (matched with errors.Is), besides those of recipe.Permanent: a
// backend's own errors that retrying cannot cure, or the caller's.
func WithPermanent(errs ...error) Option {
	return func(c *config) { c.permanent = append(c.permanent, errs...) }
}

func (c *config) isPermanent(err error) bool {
	if recipe.Permanent(err) {
		return true
	}
	for _, p := range c.permanent {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}

// Run is the leader-gated loop: until ctx ends, it acquires lock
// (lock.Acquire), runs fn while the caller holds it, releases it when fn
// returns, and acquires it again.
//
// fn gets the grant's fencing token and a context that is done when the
// grant ends or is in doubt (the lease's Context: recipe.ErrSuspended,
// recipe.ErrSessionLost, recipe.ErrNodeDeleted, ...) or when ctx ends,
// whichever comes first; context.Cause tells which. It keeps ctx's values.
// fn must return promptly once its context is done: Run waits for it, so fn
// never runs twice at once, but it is the one window in which fn runs while
// the caller no longer leads. Leadership is a lease: guard every effect
// with the token at the resource (fence.Guard), which rejects a late write
// of a former leader.
//
// When fn returns (nil or an error, which Run logs at warning level and
// otherwise ignores), panics, or leadership is lost, Run releases the
// lease (Lease.Release, on a context that ignores ctx's cancellation, so the
// release is sent and bounded by the backend's own cleanup timeout), then
// acquires again after a backoff (WithBackOff): the backoff grows while
// acquisitions fail or fn fails (returns an error while still leading), and
// is reset after every other leadership. Failed acquisitions and releases
// are logged at warning level too. A panic of fn is not recovered: it goes
// on up after the release.
//
// Run always returns a non-nil error. When the caller stops it by ending
// ctx, that error is context.Cause(ctx) (context.Canceled after a plain
// cancel, context.DeadlineExceeded after a deadline, the cause given to a
// context.WithCancelCause), returned after fn (if running) has returned and
// the lease was released. That is a normal stop, not a failure, as
// http.ErrServerClosed is from http.Server.Serve: bad arguments aside
// (reported at once), whenever ctx is done as Run returns, the error is
// ctx's cause, so
//
//	if err := leader.Run(ctx, lock, fn); ctx.Err() == nil {
//		return fmt.Errorf("leader loop: %w", err) // a real failure
//	}
//
// Run returns earlier, with the error, only when going on is pointless: an
// Acquire error that retrying cannot cure (recipe.Permanent:
// recipe.ErrSessionClosed when the session was closed,
// recipe.ErrNoPermission, recipe.ErrMixedRecipes, recipe.ErrInvalidPath,
// recipe.ErrTooLarge, recipe.ErrBadOption; and the errors of WithPermanent).
// recipe.ErrMixedRecipes ends it only when confirmed: when the next
// Acquire, after the backoff, fails with it too, so that another recipe's
// node that is on the path for a moment only does not stop a standing
// leader. Any other Acquire error (recipe.ErrSessionLost, a
// connection failure, ...) is logged and retried. Errors of its own:
// recipe.ErrBadOption for a nil lock or fn.
func Run(ctx context.Context, lock recipe.Lock, fn func(ctx context.Context, token fence.Token) error, opts ...Option) error {
	switch {
	case lock == nil:
		return fmt.Errorf("%w: nil lock", recipe.ErrBadOption)
	case fn == nil:
		return fmt.Errorf("%w: nil leader function", recipe.ErrBadOption)
	}
	c := config{}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.backoff == nil {
		c.backoff = defaultBackOff
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	stop := loop.Stopper{Confirm: recipe.ErrMixedRecipes}
	lp := loop.Loop{
		BackOff: c.backoff(),
		Max:     MaxBackOff,
		Ends:    func(err error) bool { return stop.Stop(err, c.isPermanent(err)) },
		Retrying: func(err error) {
			if c.isPermanent(err) {
				c.log.Warn("leader: another recipe's nodes are on the lock's path; trying once more before stopping", "err", err)
			} else {
				c.log.Warn("leader: acquiring the lock failed; retrying", "err", err)
			}
		},
	}
	return lp.Run(ctx, func(ctx context.Context) (loop.Next, error) {
		lease, err := c.acquire(ctx, lock)
		if err != nil {
			return loop.Wait, err
		}
		if failed := c.lead(ctx, lease, fn); failed {
			return loop.Wait, nil
		}
		return loop.Rest, nil
	})
}

func defaultBackOff() backoff.BackOff { return loop.BackOff(100*time.Millisecond, MaxBackOff) }

// lead runs fn for one leadership and releases the lease afterwards (also
// when fn panics). It reports whether fn failed: returned an error while its
// context was still live.
func (c *config) lead(ctx context.Context, lease recipe.Lease, fn func(context.Context, fence.Token) error) (failed bool) {
	fctx, cancel := context.WithCancelCause(lease.Context())
	t := c.startTerm(fctx)
	stop := context.AfterFunc(ctx, func() {
		t.endsIt(fctx)
		cancel(context.Cause(ctx))
	})
	defer func() {
		stop()
		t.endsIt(fctx)
		cancel(recipe.ErrReleased)
		t.wait()
		// Release on a context of its own: ctx may be done, and the release
		// must still be sent (the backend bounds its retries).
		err := lease.Release(context.WithoutCancel(ctx))
		if err != nil && !errors.Is(err, recipe.ErrLeaseLost) {
			c.log.Warn("leader: releasing the lock failed; the backend retries, or the lease expires", "token", lease.Token(), "err", err)
		}
	}()
	err := fn(fctx, lease.Token())
	live := fctx.Err() == nil
	if err != nil {
		c.log.Warn("leader: the leader function returned an error", "token", lease.Token(),
			"err", err, "leadership", causeText(fctx))
	}
	return err != nil && live
}

func causeText(ctx context.Context) string {
	if ctx.Err() == nil {
		return "held"
	}
	return context.Cause(ctx).Error()
}
