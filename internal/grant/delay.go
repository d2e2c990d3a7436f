package grant

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// CheckDelay validates a lock-delay option named opt (for the message, e.g.
// "WithLockDelay"): 0 turns it off, up to recipe.MaxLockDelay is served.
// Errors match recipe.ErrBadOption.
func CheckDelay(opt string, d time.Duration) error {
	if d < 0 || d > recipe.MaxLockDelay {
		return fmt.Errorf("%w: %s(%v): need 0 (none) up to %v", recipe.ErrBadOption, opt, d, recipe.MaxLockDelay)
	}
	return nil
}

// ServeDelay waits out what remains of a lock-delay (remaining <= 0 returns
// at once) on behalf of the contender that is next in line: the one shared
// wait of every backend. It returns context.Cause(ctx) if ctx ends first;
// the backend then gives up its place without recording a clean end, so
// the next contender serves the rest. rep (may be nil) names the lock for
// the INFO log line; the caller records the served delay with
// Core.SetDelayServed (which reports it to Metrics) once the grant is made.
func ServeDelay(ctx context.Context, remaining time.Duration, rep *Reporter) error {
	if remaining <= 0 {
		return nil
	}
	if rep != nil {
		log := rep.Log
		if log == nil {
			log = slog.Default()
		}
		log.LogAttrs(ctx, slog.LevelInfo, rep.Backend+": serving the lock-delay: the previous holder ended without releasing",
			slog.String("lock", shortpath.Of(rep.Dir)), slog.Duration("delay", remaining))
	}
	return loop.Sleep(ctx, remaining)
}

// SetDelayServed records the lock-delay this grant served (see
// recipe.LockDelayServed) and reports it to rep's Metrics if they
// implement recipe.DelayMetrics. Call it before the lease is handed out.
func (c *Core) SetDelayServed(d time.Duration) {
	c.delay = d
	if d <= 0 || c.rep == nil {
		return
	}
	if m, ok := c.rep.Metrics.(recipe.DelayMetrics); ok {
		m.LockDelayServed(c.rep.Kind, c.rep.Dir, d)
	}
}

// LockDelay returns the lock-delay this grant served (zero if none): what
// recipe.LockDelayServed reads.
func (c *Core) LockDelay() time.Duration { return c.delay }
