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
// How it works (docs/lock-delay.md#lock-delay-on-zookeeper): a grant writes
// its znode's name into the marker zookeeper.MarkerName in the lock
// directory before Acquire returns, and Release deletes the marker with its znode in one
// multi; a contender granted while the marker names another znode serves
// the delay. The first contender to see such a marker stamps it
// ("gone:<name>", re-created: its Ctime is the ZooKeeper leader's clock),
// and every contender, in any process, serves d minus the time since the
// stamp on the server's clock (learnt from a Set of the marker), so a
// TryAcquire from a new process (a cron job) or a contender that gives up
// does not restart the delay (a leader change between the two times adds
// the servers' clock skew; a marker this Session may not write falls back
// to the Mutex's own clock from its first sight). Every Mutex of a
// lock should get the same delay: one without the option neither serves
// nor records a delay (after its own unclean end none is served; a marker
// left by an earlier holder with the option stays for the next holder with
// it, which then serves a delay that a holder without the option skipped).
// Costs, with the option only: a read and a write of the marker per grant,
// and the Release's delete is a two-op multi; after an unclean end, the
// stamp once and a Set per contender that looks.
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
