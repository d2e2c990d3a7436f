package metricreason_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/internal/metricreason"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/recipe/zkprom"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOfAgreesWithZkprom: every error of an acquisition or cause of a loss
// gets the same word from Of as from zkprom.Reason, wrapped or not, so
// the Prometheus and the OpenTelemetry adapters label it alike.
func TestOfAgreesWithZkprom(t *testing.T) {
	errs := []error{nil, recipe.ErrLocked, context.Canceled, context.DeadlineExceeded, recipe.ErrSuspended,
		recipe.ErrSessionLost, recipe.ErrSessionClosed, recipe.ErrNodeDeleted, recipe.ErrLeaseLost,
		recipe.ErrNoPermission, recipe.ErrBadOption, zookeeper.ErrSequenceLimit, errors.New("anything else")}
	for _, err := range errs {
		for _, e := range []error{err, fmt.Errorf("wrapped: %w", err)} {
			if got, want := metricreason.Of(e), zkprom.Reason(e); got != want {
				t.Errorf("Of(%v) = %q, zkprom.Reason = %q", e, got, want)
			}
		}
	}
}
