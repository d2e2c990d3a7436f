package redislock

import (
	"context"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Internals for the tests of package redislock_test.

// Deadline returns when l's context ends unless a renewal succeeds.
func Deadline(l recipe.Lease) time.Time { return l.(*lease).deadline.At() }

// Owner returns l's owner id (the lock key's value while l holds it).
func Owner(l recipe.Lease) string { return l.(*lease).owner }

// LossAfter and RenewEvery are the recipe's fractions of the TTL.
func LossAfter(ttl time.Duration) time.Duration  { return lossAfter(ttl) }
func RenewEvery(ttl time.Duration) time.Duration { return renewEvery(ttl) }

// TryAs sends one acquire request for owner, as Acquire does on every
// attempt (and again after a lost answer).
func TryAs(ctx context.Context, m *Mutex, owner string) (recipe.Lease, time.Duration, error) {
	l, pttl, _, err := m.try(ctx, owner, false, false)
	if l == nil { // not a non-nil interface holding a nil *lease
		return nil, pttl, err
	}
	return l, pttl, err
}

// NewOwner returns a fresh owner id with the default identity.
func NewOwner() string { return newOwner(defaultIdentity()) }

// DefaultIdentity is the identity of a session without WithIdentity.
func DefaultIdentity() string { return defaultIdentity() }

// RecheckAfter is how long a waiter sleeps without a notification when the
// holder's key has pttl left.
func RecheckAfter(m *Mutex, pttl time.Duration) time.Duration { return m.recheckAfter(pttl) }

// RenewAs sends one renewal of m's key for owner and returns the script's
// answer: 1 extended, 0 not owner's, -1 too late (not extended).
func RenewAs(ctx context.Context, m *Mutex, owner string) (int64, error) {
	return m.renewAs(ctx, owner)
}
