package mutex

import (
	"time"

	"github.com/zkrecipes/zkrecipes/internal/grant"
)

// MutexOption configures New: every Option, and WithLockDelay, which only
// the exclusive Mutex takes (NewRW and NewSemaphore do not compile with
// it: a rule that grants several nodes at once has no single previous
// holder).
type MutexOption interface{ applyMutex(*config) }

func (o Option) applyMutex(c *config) {
	if o != nil {
		o(c)
	}
}

// lockDelay is WithLockDelay's MutexOption.
type lockDelay time.Duration

func (d lockDelay) applyMutex(c *config) { c.delay = time.Duration(d) }

// WithLockDelay sets a Mutex's lock-delay (Chubby's): a grant that follows
// an unclean end of the previous holder (its session expired or was
// closed without a Release, its znode deleted by someone else) first
// waits d, and meanwhile the lock is not free to anyone (TryAcquire:
// recipe.ErrLocked); after a Release the next grant does not wait.
// recipe.LockDelayServed reports what a grant served. 0 (the default)
// serves none and costs nothing; below 0 or over recipe.MaxLockDelay, New
// fails with recipe.ErrBadOption. Give every Mutex of a lock the same
// delay. The rule, its record on ZooKeeper and its costs:
// docs/lock-delay.md#lock-delay-on-zookeeper.
func WithLockDelay(d time.Duration) MutexOption { return lockDelay(d) }

// checkDelay is the Mutex's validation of WithLockDelay.
func checkDelay(c config) error { return grant.CheckDelay("mutex.WithLockDelay", c.delay) }
