// Package recipe is the backend-neutral contract of zkrecipes: the Lock and
// Lease interfaces that every lock of the module implements, the errors
// they return, the connection states they report and the Metrics hook they
// call. It imports no client library: a program links only its backend's.
//
// A grant is a Lease, and a lease is not a mutex: ownership can end at any
// moment, which its Context reports at once (context.Cause says why), and a
// holder that pauses can resume after it ended. So every Lease carries a
// fencing Token, larger than every earlier grant's of the same lock, for the
// resource to check (package fence). An error from Acquire leaves nothing
// behind.
//
//	lease, err := lock.Acquire(ctx) // mutex.New, etcdlock.New, pglock.New, redislock.New, memlock.New
//	if err != nil { return err }
//	defer lease.Release(context.Background())
//	return work(lease.Context(), lease.Token()) // the resource rejects stale tokens
//
// # Eras
//
// [InEra] moves a lock to another backend without stalling its fenced
// resources: the new backend's locks get the next era, and the operator
// raises each fence to that era's Floor (docs/backends.md#switching-backends).
// Wrap from the start (era 0) to have the range checked before any switch.
// A grant whose backend token does not fit (over fence.MaxRawToken), or a g
// past fence.MaxEra, is refused: Acquire and TryAcquire release the grant
// (the release ignores ctx's end, bounded as the backend's Release is) and
// return an error matching fence.ErrTokenOverflow, which [Permanent]
// reports (only a switch cures it); a failed release is joined to it. A nil
// l (a typed nil too) makes Acquire and TryAcquire return [ErrBadOption].
//
// # Groups
//
// [Group] and [Member] are group membership (package group on ZooKeeper,
// etcdlock.Group on etcd): a registration that lives while the process
// does, with a context per registration that ends before others can see
// the member gone, and views of the group as the server held it
// (docs/membership.md). testkit/grouptest checks an implementation.
//
// testkit/locktest is the conformance suite every backend passes
// (docs/backends.md).
package recipe
