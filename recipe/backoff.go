package recipe

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// LoopBackOff returns the backoff policy of a standing participation loop
// (the latch's re-joins, election.Run's campaigns): exponential from
// initial to max, randomized by ±50 %, with no limit on the total time.
func LoopBackOff(initial, max time.Duration) backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = initial
	b.MaxInterval = max
	b.RandomizationFactor = 0.5
	b.MaxElapsedTime = 0
	return b
}

// Pause waits for b's next interval (or for max when b says backoff.Stop),
// and returns nil, or ctx's cause if ctx ends first. It is the one wait
// between attempts of every recipe loop.
func Pause(ctx context.Context, b backoff.BackOff, max time.Duration) error {
	d := b.NextBackOff()
	if d == backoff.Stop {
		d = max
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
