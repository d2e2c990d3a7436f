// Package loop is the standing participation loop of this module: attempt
// (acquire a lock, wait for a latch's grant), lead while granted, back off,
// attempt again, until the caller stops it or an error that retrying cannot
// cure ends it. leader.Run (and so election.Run) and the leader latch run
// it; BackOff and Pause also pace the backends' own retries (a request
// retried while the server can't be reached); Stopper is the rule that ends
// every standing loop of the module.
package loop

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// BackOff returns the backoff policy of a standing loop: exponential from
// initial to max, randomized by ±50 %, with no limit on the total time.
// Its first interval is initial's (the package's constructor starts from
// its own default, 500 ms, unless told again: Reset).
func BackOff(initial, max time.Duration) backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = initial
	b.MaxInterval = max
	b.RandomizationFactor = 0.5
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

// Pause waits for b's next interval (or for max when b says backoff.Stop),
// and returns nil, or ctx's cause if ctx ends first.
func Pause(ctx context.Context, b backoff.BackOff, max time.Duration) error {
	d := b.NextBackOff()
	if d == backoff.Stop {
		d = max
	}
	return Sleep(ctx, d)
}

// Sleep waits d, and returns nil, or ctx's cause if ctx ends first. It is
// the one wait between attempts of every loop and retry of this module
// (Pause waits with it).
func Sleep(ctx context.Context, d time.Duration) error { return SleepOr(ctx, d, nil, nil) }

// SleepOr is Sleep that also ends when quit is closed, returning quitErr
// (a nil quit never ends it): a wait that must end with its owner, such as
// a retry's pause that a Session's Close ends with recipe.ErrSessionClosed.
func SleepOr(ctx context.Context, d time.Duration, quit <-chan struct{}, quitErr error) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-quit:
		return quitErr
	}
}

// Stopper tells a standing loop (leader.Run and so election.Run, the
// leader latch, recipe's ObserveHead) when the error of an attempt ends
// it. An error that retrying cannot cure (permanent) ends it at once,
// except one matching Confirm, which ends it only when confirmed: met by
// the next attempt too, after the loop's wait. For the recipes Confirm is
// recipe.ErrMixedRecipes: another recipe's node can be on the path for a
// moment only (a lock taken on an election's path by mistake, and
// released at once), which must not stop a standing leader for good; a
// path that another recipe keeps using still ends the loop within one
// wait. One per loop.
type Stopper struct {
	Confirm error // matched with errors.Is; nil: every permanent error ends the loop at once
	met     bool  // the last attempt's error matched Confirm
}

// Stop records the outcome of an attempt (err nil for a success) and
// reports whether the loop ends on it. permanent says whether err is one
// that retrying cannot cure (recipe.Permanent(err), or an error of the
// loop's own).
func (s *Stopper) Stop(err error, permanent bool) bool {
	met := s.Confirm != nil && errors.Is(err, s.Confirm)
	confirmed := met && s.met
	s.met = met
	return permanent && (!met || confirmed)
}

// Next is what the loop does after an attempt.
type Next int

const (
	// Wait waits the backoff's next interval, which grows from one Wait to
	// the next (after a failure), then attempts again.
	Wait Next = iota
	// Rest resets the backoff and waits its first interval (after a
	// leadership that ended normally).
	Rest
	// Now resets the backoff and attempts again at once.
	Now
)

// Loop is one standing loop's policy. BackOff and Ends are required.
type Loop struct {
	BackOff backoff.BackOff
	// Max is the wait when BackOff says backoff.Stop.
	Max time.Duration
	// Ends is told the error of every attempt (nil for a success) and
	// reports whether it ends the loop: a Stopper's Stop with the caller's
	// idea of what retrying cannot cure.
	Ends func(err error) bool
	// Retrying, if set, is told every error that does not end the loop,
	// before the wait: the place to log it.
	Retrying func(err error)
}

// Run calls attempt until ctx ends, and then returns context.Cause(ctx),
// or until Ends says an attempt's error ends the loop, and then returns
// that error. After each attempt it waits as the attempt's Next says.
// attempt gets ctx; an attempt that returns because ctx ended may return
// any error (Run returns ctx's cause).
func (l *Loop) Run(ctx context.Context, attempt func(ctx context.Context) (Next, error)) error {
	for {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		next, err := attempt(ctx)
		if err != nil && ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if l.Ends(err) {
			return err
		}
		if err != nil && l.Retrying != nil {
			l.Retrying(err)
		}
		if next != Wait {
			l.BackOff.Reset()
		}
		if next == Now {
			continue
		}
		if err := Pause(ctx, l.BackOff, l.Max); err != nil {
			return err
		}
	}
}
