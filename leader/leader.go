package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/isnil"
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
	onReturn  OnReturn       // WithOnReturn
	health    *Health        // WithHealth; nil: none
}

// WithBackOff sets the backoff Run waits between acquisitions: after a
// failed Acquire or a failed fn (an error while still leading) and, reset
// first, after a term that ended with the lease (a fn that returned early
// waits WithOnReturn's pause instead). newBackOff is called once per Run. When it
// returns backoff.Stop, Run waits MaxBackOff: the policy never ends Run.
// Default (also for nil): exponential from 100 ms to MaxBackOff, ±50 %.
func WithBackOff(newBackOff func() backoff.BackOff) Option {
	return func(c *config) { c.backoff = newBackOff }
}

// WithLogger sets the logger of Run's warnings (default, also for nil:
// slog.Default(); add the lock's name with logger.With).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithPermanent adds errors (matched with errors.Is) that end Run when an
// Acquire fails with them, besides those of recipe.Permanent.
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

// Run is the leader-gated loop: until ctx ends, it acquires lock, runs fn
// while the caller holds it, releases it when fn returns, and acquires it
// again: after a backoff (WithBackOff) when the lease was lost or fn
// failed, after DefaultRequeuePause when fn returned nil while leading
// (WithOnReturn). fn's ctx is done when the lease's Context is or ctx ends;
// fn must then return promptly, as Run waits for it. Run returns
// context.Cause(ctx) once ctx ends; earlier, an Acquire error retrying
// cannot cure, what fn returned under WithOnReturn(Stop()), or
// recipe.ErrBadOption for a nil lock or fn (see Run in the package
// documentation).
func Run(ctx context.Context, lock recipe.Lock, fn func(ctx context.Context, token fence.Token) error, opts ...Option) error {
	switch {
	case isnil.Is(lock): // also a typed nil (var m *redislock.Mutex), whose methods would panic
		return fmt.Errorf("%w: nil lock", recipe.ErrBadOption)
	case fn == nil:
		return fmt.Errorf("%w: nil leader function", recipe.ErrBadOption)
	}
	c := config{onReturn: Requeue(DefaultRequeuePause)}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.onReturn.pause < 0 {
		return fmt.Errorf("%w: negative requeue pause %v", recipe.ErrBadOption, c.onReturn.pause)
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
		Ends: func(err error) bool {
			var d fnDone
			return errors.As(err, &d) || stop.Stop(err, c.isPermanent(err))
		},
		Retrying: func(err error) {
			if c.isPermanent(err) {
				c.log.Warn("leader: another recipe's nodes are on the lock's path; trying once more before stopping", "err", err)
			} else {
				c.log.Warn("leader: acquiring the lock failed; retrying", "err", err)
			}
		},
	}
	err := lp.Run(ctx, func(ctx context.Context) (loop.Next, error) {
		lease, err := c.acquire(ctx, lock)
		if err != nil {
			return loop.Wait, err
		}
		early, err := c.lead(ctx, lease, fn)
		switch {
		case !early:
			return loop.Rest, nil
		case c.onReturn.stop:
			return loop.Now, fnDone{err}
		case err != nil:
			return loop.Wait, nil
		case c.onReturn.backoff:
			return loop.Rest, nil
		}
		return loop.Now, loop.Sleep(ctx, c.onReturn.pause)
	})
	if d, ok := err.(fnDone); ok {
		return d.err
	}
	return err
}

// fnDone ends Run with fn's early return under Stop: err is fn's (nil
// included).
type fnDone struct{ err error }

func (fnDone) Error() string { return "leader: the leader function returned" }

func defaultBackOff() backoff.BackOff { return loop.BackOff(100*time.Millisecond, MaxBackOff) }

// lead runs fn for one term and releases the lease afterwards (also when fn
// panics). It reports whether fn returned early (while its context was
// live: leading, not stopped by ctx), and fn's error, which it logs unless
// Stop hands it to Run's caller.
func (c *config) lead(ctx context.Context, lease recipe.Lease, fn func(context.Context, fence.Token) error) (early bool, _ error) {
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
	defer c.health.Track(lease)() // before the release: fn has returned
	err := fn(fctx, lease.Token())
	// ctx too: fctx ends with ctx on AfterFunc's goroutine, maybe not yet.
	early = fctx.Err() == nil && ctx.Err() == nil
	if err != nil && !(early && c.onReturn.stop) {
		c.log.Warn("leader: the leader function returned an error", "token", lease.Token(),
			"err", err, "leadership", causeText(fctx))
	}
	return early, err
}

func causeText(ctx context.Context) string {
	if ctx.Err() == nil {
		return "held"
	}
	return context.Cause(ctx).Error()
}
