package mutex

import (
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// WithLockDelay sets a Mutex's lock-delay (Chubby's; see
// recipe.LockDelayServed): a grant that follows an unclean end of the
// previous holder (its session expired or was closed without a Release,
// its znode was deleted by someone else) first waits d, and meanwhile the
// lock is not free to anyone (TryAcquire: recipe.ErrLocked). After a
// Release the next grant does not wait. 0 (the default) serves none and
// costs nothing; below 0 or over recipe.MaxLockDelay, New fails with
// recipe.ErrBadOption. NewRW and NewSemaphore refuse it (ErrBadOption).
//
// How it works (docs/design.md#lock-delay-on-zookeeper): a grant writes
// its znode's name into the marker zookeeper.MarkerName in the lock
// directory before Acquire returns, and Release deletes the marker with its znode in one
// multi; a contender granted while the marker names another znode serves
// the delay. ZooKeeper has no clock a client can read, so the delay is
// counted from when the contender's Mutex first saw that marker: at least
// d after the loss became visible to it; a contender that gives up
// while serving it leaves the marker, and the next one serves d again
// (at most one more delay per contender that gives up). Every Mutex of a
// lock should get the same delay: one without the option neither serves
// nor records a delay (after its own unclean end none is served; a marker
// left by an earlier holder with the option stays for the next holder with
// it, which then serves a delay that a holder without the option skipped).
// Costs, with the option only: a read and a write of the marker per grant,
// and the Release's delete is a two-op multi.
func WithLockDelay(d time.Duration) Option {
	return func(c *config) { c.delay = d }
}

// checkNoDelay validates the lock-delay for a lock that does not offer it
// (the read-write lock, the semaphore): any but 0 is recipe.ErrBadOption.
func checkNoDelay(c config, what string) error {
	if c.delay != 0 {
		return fmt.Errorf("%w: WithLockDelay(%v): %s has no lock-delay (only New's Mutex does)", recipe.ErrBadOption, c.delay, what)
	}
	return nil
}

// checkDelay is the Mutex's validation of WithLockDelay.
func checkDelay(c config) error { return grant.CheckDelay("mutex.WithLockDelay", c.delay) }
