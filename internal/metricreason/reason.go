// Package metricreason names the error of an acquisition, or the cause of
// a lease's end, with the one bounded vocabulary every metrics adapter of
// this repository uses for its reason and cause labels or attributes
// (recipe/prommetrics's labels, recipe/otelmetrics's attributes): a closed set of
// words, never the error's text, which can name paths, hosts or users.
package metricreason

import (
	"context"
	"errors"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Of returns err's reason: "locked" (recipe.ErrLocked), "canceled"
// (context.Canceled), "deadline" (context.DeadlineExceeded), "suspended"
// (recipe.ErrSuspended), "session_lost", "session_closed", "node_deleted",
// "lease_lost", "no_permission", "bad_option", a backend sentinel's own
// word (its MetricReason method: zookeeper.ErrSequenceLimit's
// "sequence_limit"), or "other". prommetrics.Reason is Of (its tests check the words).
func Of(err error) string {
	switch {
	case errors.Is(err, recipe.ErrLocked):
		return "locked"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, recipe.ErrSuspended):
		return "suspended"
	case errors.Is(err, recipe.ErrSessionLost):
		return "session_lost"
	case errors.Is(err, recipe.ErrSessionClosed):
		return "session_closed"
	case errors.Is(err, recipe.ErrNodeDeleted):
		return "node_deleted"
	case errors.Is(err, recipe.ErrLeaseLost):
		return "lease_lost"
	case errors.Is(err, recipe.ErrNoPermission):
		return "no_permission"
	case errors.Is(err, recipe.ErrBadOption):
		return "bad_option"
	}
	// A backend's own sentinel names its word, so that no adapter imports a
	// backend.
	var labeled interface{ MetricReason() string }
	if errors.As(err, &labeled) {
		return labeled.MetricReason()
	}
	return "other"
}
