// Package etcdlock is the etcd backend of zkrecipes: a fenced,
// lease-bound exclusive lock (Mutex) that implements recipe.Lock, so code
// written against recipe.Lock and recipe.Lease runs on etcd as it runs on
// ZooKeeper, and passes the same conformance suite (testkit/locktest).
//
// # Recipe
//
// A Session holds one etcd lease (TTL DefaultTTL) and keeps it alive. Each
// Acquire puts a key of its own, <prefix>/<name>/_lock_<random GUID>, under
// that lease, in one transaction that also reads the lock's first key. The
// holder is the key with the lowest create revision; a waiter watches only
// the deletion of the nearest key below its own (no herd) and reads its
// position again after every event. The fencing token is the key's create
// revision. Release deletes the key in a transaction that compares its
// create revision, so a retried Release can't delete a newer key.
//
// This is the lock of etcd's own concurrency package without its hazards.
// There the key is named after the session's lease (etcd PR 5199), so
// contenders of one session share one key and both hold; a retried Unlock
// deletes by name and can delete a newer holder's key (issue 22082); a
// waiter whose session died keeps waiting (issue 19597); and the keep-alive
// loop keeps retrying while the server is unreachable (issue 5571), so a
// partitioned holder is not told that its lease ran out. Here a put whose
// answer was lost is retried as the same idempotent transaction, which
// finds the key it made (the recovery that named keys were meant to avoid),
// and ownership is timed by the client, from keep-alive send times.
//
// # When ownership ends: the numbers
//
// Keep-alives go out every TTL/6. A Lease's context ends (cause
// recipe.ErrSuspended) 2/3 of the TTL after the *send* time of the newest
// keep-alive the server acknowledged. The server expires the etcd lease no
// sooner than a full TTL after it *received* that keep-alive (the leader
// checks every 500 ms, and a new leader extends every lease), and only then
// deletes the key and lets the next contender in. So the holder gives up at
// least TTL/3 before anyone else can be granted. With the default TTL of
// 10 s, a holder cut off from etcd sees its context end at most 6.7 s after
// the cut (5 s at the earliest when keep-alives are answered promptly); the server grants the lock to another contender no sooner than
// 8.3 s after it (10 s after the last keep-alive it received), typically
// 10 to 10.5 s. The tests use a 3 s TTL: the context ended 1.5 to 2.0 s
// after a cut, the next grant came 2.6 to 3.3 s after it, and never less
// than 1.0 s after the context ended.
//
// Other losses: the server answers that the etcd lease is gone
// (recipe.ErrSessionLost: it expired or was revoked), the key is deleted by
// someone else (recipe.ErrNodeDeleted), Session.Close
// (recipe.ErrSessionClosed). A lost etcd lease ends every Lease granted
// under it and every Acquire waiting under it; the next acquisition grants
// a new etcd lease.
//
// # Lock-delay
//
// WithLockDelay(d) makes a grant that follows an unclean end of the
// previous holder wait d first (recipe.MaxLockDelay). Two keys beside the
// contenders' in the lock's range keep the record (WithLockDelay,
// docs/lock-delay.md#lock-delay-on-etcd); locks without the option read and
// write neither key and cost nothing more.
//
// # The guarantee
//
// While a Lease's context is not done, no other contender has been granted
// the lock by a live etcd lease. A Lease is a lease, not a mutex: a holder
// that pauses (GC, swap, a stopped VM) can resume after its context ended.
// Reject stale holders at the resource with the token (package fence).
package etcdlock
