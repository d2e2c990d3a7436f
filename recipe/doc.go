// Package recipe is the backend-neutral contract of zkrecipes: the Lock and
// Lease interfaces that every lock of the module implements, whatever its
// backend, the errors they return, the connection states they report and
// the Metrics hook they call. It imports no client library: a program that
// uses one backend links only that backend's client.
//
// A Lock's Acquire blocks until the caller holds it; TryAcquire never waits.
// Each grant is a Lease, and a lease is not a mutex: ownership can end at any
// moment (a suspension, the session's loss, the lock's entry deleted), which
// the Lease's Context reports at once (context.Cause says why), and a holder
// that pauses can resume after it ended. So every Lease carries a fencing
// Token, larger than every earlier grant's of the same lock, for the
// resource to check (package fence). Release gives the lease up; an error
// from Acquire never leaves anything behind.
//
// The backends: package zookeeper (the home backend, with the recipes of
// packages mutex, election and latch built on it), backend/etcdlock,
// backend/pglock, backend/redislock, and recipe/memlock (in memory, for
// tests). recipe/locktest is the conformance suite every one of them passes.
package recipe
