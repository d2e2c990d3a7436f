package grant

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The lock-delay's rule, written once (recipe.MaxLockDelay states the
// option's contract, docs/lock-delay.md argues it). A backend
// keeps only its record: it writes "held by me" before Acquire returns a
// grant, and a clean Release removes that record in the step that frees
// the lock. The contender next in line that finds a record naming a gone
// holder serves the delay with these steps, in order:
//
//  1. CheckDelay in New: the option's bounds.
//  2. The rest of the delay: Rest from the server's clock where the record
//     keeps the delay's start, else a Sight of the gone holder (its first
//     sight on the local clock).
//  3. Serving.Wait for that rest, keeping its place (Serving.Refuse for a
//     TryAcquire that finds some left); an Acquire that gives up leaves the
//     record, so the next contender serves only the rest.
//  4. Its own record, then Core.SetDelayServed(Serving.Served()) before the
//     lease is handed out.
//
// A failure anywhere only leaves the record naming a gone holder: it can
// add a delay, never skip one.

// CheckDelay validates a lock-delay option named opt (for the message, e.g.
// "etcdlock.WithLockDelay"): 0 turns it off, up to recipe.MaxLockDelay is
// served. Errors match recipe.ErrBadOption.
func CheckDelay(opt string, d time.Duration) error {
	if d < 0 || d > recipe.MaxLockDelay {
		return fmt.Errorf("%w: %s(%v): need 0 (none) up to %v", recipe.ErrBadOption, opt, d, recipe.MaxLockDelay)
	}
	return nil
}

// Rest returns what remains of a lock-delay of length d that began elapsed
// ago, both on the server's clock: d - elapsed, kept in [0, d], so that a
// clock set back never makes the wait longer than d.
func Rest(d, elapsed time.Duration) time.Duration { return min(max(d-elapsed, 0), d) }

// Sight is the start of a lock-delay on the local clock, for a record that
// does not keep the delay's start on the server's: when this contender (or
// the contenders sharing the Sight) first saw a record naming the gone
// holder. Its zero value has seen none; it is safe for concurrent use.
type Sight struct {
	mu   sync.Mutex
	gone string    // the gone holder first seen at at
	at   time.Time // zero: none seen yet
}

// Left returns what remains of a lock-delay of length d for the record
// naming gone, counted from the first sight of gone: a name not seen
// before (or another than the last) starts the delay now, in [0, d].
func (s *Sight) Left(gone string, d time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() || gone != s.gone {
		s.gone, s.at = gone, time.Now()
	}
	return Rest(d, time.Since(s.at))
}

// Serving is one contender's service of the lock-delay, from its first
// wait to its grant (one Acquire, across its retries): the time it waited,
// and whether it logged that it waits. Make it with NewServing; it is not
// safe for concurrent use.
type Serving struct {
	rep    *Reporter
	upTo   time.Duration // the most Served reports
	served time.Duration
	logged bool
}

// NewServing starts the service of a contender of the lock rep names (nil:
// no log line) whose delay is at most upTo: the option's d (on Redis, the
// rest of a deleted holder's TTL as well).
func NewServing(rep *Reporter, upTo time.Duration) *Serving {
	return &Serving{rep: rep, upTo: upTo}
}

// Wait waits out rest (<= 0 returns at once) while the contender keeps its
// place, and adds what it waited to Served. The first wait of a Serving
// logs one INFO line. It returns context.Cause(ctx) if ctx ends first: the
// backend then gives up its place without recording a clean end, so that
// the next contender serves the rest.
func (s *Serving) Wait(ctx context.Context, rest time.Duration) error {
	if rest <= 0 {
		return nil
	}
	if s.rep != nil && !s.logged {
		s.logged = true
		log := s.rep.Log
		if log == nil {
			log = slog.Default()
		}
		log.LogAttrs(ctx, slog.LevelInfo, s.rep.Backend+": serving the lock-delay: the previous holder ended without releasing",
			slog.String("lock", shortpath.Of(s.rep.Dir)), slog.Duration("delay", rest))
	}
	start := time.Now()
	err := loop.Sleep(ctx, rest)
	s.served += min(time.Since(start), rest)
	return err
}

// Served returns what the contender waited in all, at most upTo: what
// Core.SetDelayServed records (recipe.LockDelayServed).
func (s *Serving) Served() time.Duration { return min(s.served, s.upTo) }

// Refuse is a TryAcquire's answer when it finds rest of a lock-delay left
// after gone (the gone holder's name, "" if unknown) ended without a
// Release: an error matching recipe.ErrLocked. A TryAcquire never waits.
func (s *Serving) Refuse(gone string, rest time.Duration) error {
	var backend, lock string
	if s.rep != nil {
		backend, lock = s.rep.Backend+": ", shortpath.Of(s.rep.Dir)
	}
	if gone != "" {
		gone = " after " + gone + " ended without a Release"
	}
	return fmt.Errorf("%w: %s%s (serving the lock-delay%s: %v left)", recipe.ErrLocked, backend, lock, gone, rest.Round(time.Millisecond))
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
