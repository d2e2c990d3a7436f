// Package redislock is a fenced lock on a single Redis server behind the
// backend-neutral recipe.Lock and recipe.Lease: every grant carries a fencing
// token larger than every earlier grant's, and a context that ends the
// moment ownership is released or in doubt. It passes the conformance suite
// recipe/locktest, like the ZooKeeper mutex.
//
// It is its own Go module (github.com/zkrecipes/zkrecipes/backend/redislock)
// so that users of the ZooKeeper recipes never download go-redis.
//
// # Recipe
//
// A lock named n has two keys and a channel (prefix: WithKeyPrefix):
//
//   - n:holder, the lock: the holder's owner id (host, pid, 130 random bits;
//     one per Acquire call), with a PX expiry of the TTL;
//   - n:token, the token counter: an integer without expiry that the
//     package never deletes;
//   - n:released, a pub/sub channel told of every release.
//
// Acquire is one script: SET n:holder owner NX PX ttl and, only if that took
// the lock, INCR n:token, whose result is the grant's token. Grant order is
// token order because both happen in one atomic script. A renewer sends a
// compare-and-PEXPIRE script every third of the TTL; Release is a
// compare-and-DEL script that also PUBLISHes to the waiters. Every script
// compares the owner first, so none touches another holder's grant, and each
// can be sent again with the same owner after a lost answer: a repeated
// acquire finds its own grant and returns its token.
//
// A waiting Acquire subscribes to the release channel (one pub/sub
// connection per waiting call) and tries again on every message; as the
// fallback for notifications that never come (a holder that crashed and
// expired, a message lost with a connection) it also tries again when the
// holder's key is due to expire, plus up to a tenth of that at random. There
// is no queue: whichever waiter reaches the server first after a release
// wins, so order is not FIFO and a waiter can in theory lose every race.
//
// # Numbers
//
// With TTL T (default DefaultTTL, 10 s):
//
//   - the holder's lease context ends (cause recipe.ErrSuspended) 2/3·T after
//     the send time of its last successful SET or renewal, measured on the
//     client's monotonic clock; a renewal answered "not ours" ends it at once
//     (recipe.ErrNodeDeleted). After a cut the context ends between T/3 and
//     2/3·T after the cut (at most 6.7 s by default, 1.33 s with the tests'
//     T = 2 s);
//   - the server lets another contender in no sooner than T after it ran
//     that request (PX counts from its execution, which is after our send),
//     so at least T/3 after the holder's context ended; TestLossBeforeServerExpiry
//     checks both on a real server (the key outlives the deadline at every
//     renewal, read with PEXPIRETIME; a cut-off holder's context ends before
//     a polling contender is granted) and logs the figures;
//   - a crashed holder's lock is granted to a waiter between 2/3·T and T
//     after the crash, plus the waiter's jitter (at most T/10).
//
// The third of T between the two bounds absorbs the client's timer and
// scheduling delays and the server's clock running slightly fast (MinTTL
// says why it is at least 1 s). It does not cover a holder that pauses after
// its context ended and then writes: fencing does (package fence).
//
// A renewal the network held back (a partition that heals: TCP delivers
// what it buffered) can reach the server after its lease gave up. Two
// things keep it from holding the lock for nobody: the renewal script
// refuses to extend a key with less than T/3 left (it runs more than 2/3·T
// after the previous renewal ran, so after the lease's deadline), and a
// lease that gave up (recipe.ErrSuspended) deletes its own key,
// owner-checked, as soon as the server answers again, so a renewal landing
// after that finds nothing of its owner to extend.
// TestLateRenewalAfterHealLeavesNothing measures it (T = 4 s: the lock was
// held by nobody for 3.7 s after the lease gave up, now 12 ms).
//
// # Restarts and durability
//
// The test servers run with appendonly yes and appendfsync always: Redis
// writes every script's effects to the append-only file and fsyncs it before
// answering. A crash (SIGKILL) and restart then loses nothing that was
// answered: tokens keep growing, and a held key comes back with its
// absolute expiry (the downtime counts against it), so the holder's next
// renewal finds it theirs if its lease is still live, and nobody else is let
// in meanwhile. Connect warns when the server is configured otherwise,
// because then a crash can lose the last INCRs (the counter goes back and a
// later grant repeats a token the resource has seen: fencing breaks) and the
// last SET (someone else is granted a lock whose holder still has a live
// context: two holders). A graceful restart (SHUTDOWN) with appendfsync
// everysec loses nothing either; a crash or power loss can lose the last
// second.
//
// # Single node only, and no Redlock
//
// Locks live on one primary. Redis replication is asynchronous: a failover
// to a replica that had not yet received the last SET and INCR grants the
// lock again with an old token. Connect refuses a replica (ErrNotPrimary)
// and warns about a primary with replicas. Redlock (a majority of
// independent primaries) is not offered: it gives no fencing token (the
// servers' values have no common order), and its safety depends on timing
// assumptions (bounded pauses, network delays and clock drift), so a holder
// that pauses past its lease can still write while another holds the lock,
// with nothing to tell the two apart. Here a single server gives a total
// order of grants, which the token carries to the resource. Its expiry uses
// the server's wall clock: a clock stepped forward expires keys early, so
// run the server with a slewing time daemon.
//
// Nothing outside this package may write the keys: an operator's DEL frees
// the lock at once, while the holder finds out only at its next renewal (up
// to T/3 later); fencing is what protects the resource then. FLUSHALL, and
// eviction under maxmemory with any policy but noeviction (Connect warns),
// reset the token counter. docs/backends.md has the full list of hazards and
// the review checklist.
package redislock
