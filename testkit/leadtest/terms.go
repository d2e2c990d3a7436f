package leadtest

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/cenkalti/backoff/v4"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// ThreeTerms runs leader.Run on lock for three terms: the first steps
// down, the second loses its lease (cut cuts the lock's client off, heal
// heals it once that term's context ended), the third is ended by the
// caller with a cause of its own. It returns Run's error and that cause.
// opts go before the options of the scenario (a discarding logger, a
// backoff that does not wait, WithOnReturn(Requeue(0))). The metrics
// tests of package leader and of the Prometheus adapter's module run it.
func ThreeTerms(t *testing.T, lock recipe.Lock, cut, heal func(), opts ...leader.Option) (err, stopped error) {
	t.Helper()
	stopped = errors.New("stopped by the test")
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	n := 0
	base := []leader.Option{
		leader.WithLogger(slog.New(slog.DiscardHandler)),
		leader.WithBackOff(func() backoff.BackOff { return &backoff.ZeroBackOff{} }),
		leader.WithOnReturn(leader.Requeue(0)),
	}
	err = leader.Run(ctx, lock, func(fctx context.Context, _ fence.Token) error {
		n++
		switch n {
		case 1:
			return nil
		case 2:
			cut()
			<-fctx.Done()
			heal()
			return nil
		}
		stop(stopped)
		<-fctx.Done()
		return nil
	}, append(opts, base...)...)
	return err, stopped
}
