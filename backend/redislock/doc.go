// Package redislock is a fenced lock on a single Redis server behind the
// backend-neutral recipe.Lock and recipe.Lease: every grant carries a fencing
// token larger than every earlier grant's, and a context that ends the
// moment ownership is released or in doubt. It passes the conformance suite
// testkit/locktest, like the ZooKeeper mutex.
//
// It is its own Go module (github.com/zkrecipes/zkrecipes/backend/redislock)
// so that users of the ZooKeeper recipes never download go-redis.
//
// # Recipe
//
// A lock named n has three keys (four with WithLockDelay), and a channel
// per waiter (prefix: WithKeyPrefix):
//
//   - n:holder, the lock: the holder's owner id (WithIdentity's id, else
//     host and pid; ':' and 130 random bits, one per Acquire call), with a
//     PX expiry of the TTL; while the lock is handed to a waiter, "next:"
//     and that waiter's owner id;
//   - n:token, the token counter: an integer without expiry that the
//     package never deletes;
//   - n:queue, the waiters: a sorted set of owner ids in arrival order,
//     which expires on its own once nobody waits;
//   - n:delay, the lock-delay marker (WithLockDelay only): "held:" and
//     the last holder's owner id, expiring the delay after n:holder, and
//     deleted by a Release;
//   - n:wake:<owner>, the pub/sub channel a waiter is woken on.
//
// Acquire is one script: SET n:holder owner PX ttl and INCR n:token, whose
// result is the grant's token, if the lock is free and nobody is queued
// before the caller, or handed to the caller. Grant order is token order
// because both happen in one atomic script. A renewer sends a
// compare-and-PEXPIRE script every third of the TTL; Release is a compare
// script that hands the lock to the next waiter. Every script compares the
// owner first, so none touches another holder's grant, and each can be sent
// again with the same owner after a lost answer: a repeated acquire finds
// its own grant and returns its token.
//
// # Waiting: FIFO, one wake-up per release
//
// A waiting Acquire subscribes to its own channel on the Session's one
// pub/sub connection (shared by all its waiters), and only once the server
// has confirmed the subscription does it join the queue (in its next
// acquire script). Release pops the queue's head and PUBLISHes to its
// channel; PUBLISH answers how many subscribers got the message, so a head
// with none (its process crashed, it gave up, its connection dropped) is
// skipped and the next one popped. The first live head gets the lock
// handed to it ("next:owner", for at most the TTL) and is the only waiter
// woken: a hand-off costs a fixed number of commands, however many wait
// (about 12 in TestHandOffWorkDoesNotGrowWithWaiters, with 50 or 200
// waiters). No wake-up is lost: a waiter is queued only while subscribed,
// so a hand-off to it either reaches it or, if its connection dropped,
// skips it; go-redis then subscribes again, and that confirmation wakes
// the waiter, which checks the lock and joins the queue again if it was
// skipped. A waiter that gives up leaves the queue (and passes on a lock
// handed to it).
//
// The fallback for wake-ups that never come (a crashed holder's key
// expires without a release; a cut-off waiter is handed the lock and never
// claims it) is unchanged: every waiter checks again when the lock key is
// due to expire, plus up to a tenth of that at random. A check that finds
// the lock free with waiters queued hands it to the head, so the queue
// moves on within the bound of a crashed holder (below).
//
// # Who holds the lock
//
// [Mutex.Holder] reads n:holder and n:token in one read-only script (two
// GETs) and reports the holder's identity (its owner id without the random
// part: WithIdentity, default "host:pid") and its grant's token; Since is
// zero (no grant time is stored, so grants cost nothing more). A lock
// handed to a waiter that has not claimed it ("next:") is reported free.
// [Mutex.ObserveHolder] polls that script: every 500 ms by default
// (WithHolderPoll), so a change is reported at most 500 ms plus one read
// after the server made it, and a holder that comes and goes between two
// polls can be missed. Data this package never writes is ErrBadData. The
// script runs with EVALSHA (EVAL the first time) and GETs only: the ACL
// line below allows it, and Connect's probe checks both.
//
// # Access control (Redis ACL)
//
// Connect and NewSession check that the user may do what the locks do, by
// doing it on a probe key and channel of the prefix (the probe leaves
// nothing): EVAL and EVALSHA, the commands the scripts run on the keys of
// the prefix, PUBLISH, SUBSCRIBE and UNSUBSCRIBE on its channels. A refusal
// is a *PermissionError (recipe.ErrNoPermission) naming the right. (ACL
// DRYRUN would need an administrative right the locking user should not
// have.) Redis 7 gives a new user no channel at all (acl-pubsub-default
// resetchannels): without channel rights a waiter could only be woken by
// its fallback re-check. A dedicated user with the default prefix needs
// exactly this ACL line:
//
//	ACL SETUSER locker on >PASSWORD resetkeys ~zkrecipes:lock:* resetchannels &zkrecipes:lock:* -@all +ping +role +eval +evalsha +subscribe +unsubscribe +get +set +incr +pexpire +pttl +del +publish +zadd +zrem +zscore +zrange +zpopmin
//
// (+role lets Connect refuse a replica; add +select for a database other
// than 0, and +config|get for the persistence check, which also shows
// every setting, requirepass and masterauth included.) Rights revoked
// later are reported, never swallowed: a refused script fails Acquire at
// once and logs renewals at ERROR; a release whose PUBLISH is refused
// frees the lock, logs at ERROR and returns a *PermissionError.
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
//
// # Connecting
//
// [Connect] parses url (redis://[user:password@]host:port[/db], or rediss://
// for TLS with the system's roots, or either with WithTLS for TLS with a
// configuration of one's own; go-redis query parameters such as dial_timeout
// are honoured), checks that the server answers PING and is a primary, and
// returns a Session that owns its client.
//
// The client is go-redis's with two settings forced, because the package's
// guarantees rest on them: ContextTimeoutEnabled (every request is bounded
// by its context's deadline, so a renewal never outlives the lease's
// deadline) and no automatic retries (MaxRetries -1: the package retries
// itself, knowing which requests are safe to repeat). Dials are not retried
// either (DialerRetries 1) unless the URL sets dialer_retries.
//
// Errors: ErrBadURL for a URL it can't use (nothing is dialled);
// recipe.ErrBadOption for an invalid option; a *recipe.OpError wrapping the
// dial or reply error if the server does not answer within ctx and the dial
// timeout (default 5 s), which also matches recipe.ErrUnreachable when the
// network failed or ctx's deadline passed before an answer (with the
// deadline too; not for a cancelled ctx); ErrNotPrimary if it is a replica.
// The server's persistence settings are checked too: without appendonly yes
// and appendfsync always a warning is logged (see Restarts and durability
// above). No error shows the URL's password (or a query parameter named like
// one). A refused password or user (WRONGPASS, NOAUTH) or client certificate
// matches recipe.ErrNoPermission; a server certificate that fails
// verification, TLS against a plaintext port (after the dial timeout) and
// plaintext against a TLS port (at once) match recipe.ErrUnreachable and say
// so (docs/backends.md, "Errors at connect"; reach.go).
//
// The user's ACL rights are checked by use (the package documentation
// gives the ACL line): a *PermissionError, matching recipe.ErrNoPermission,
// names a missing one.
//
// [NewSession] takes a client made by the caller instead: it must have
// ContextTimeoutEnabled set, so that requests end at their context's
// deadline; its MaxRetries is harmless (every script of the package can be
// repeated). WithDialer and WithTLS are not accepted.
//
// # Acquire
//
// [Mutex.Acquire] waits until the caller holds the lock and returns its
// lease, or returns ctx's cause when ctx ends first (also while a request is
// in flight: a grant that lands then is released). Waiters are served in
// arrival order and cost no polling: a waiting call subscribes to a channel
// of its own (on the Session's one pub/sub connection), then joins the
// lock's queue, and a release hands the lock to the queue's head and wakes
// only that waiter. As the fallback for wake-ups that never come (an expired
// holder, a lost message) it also checks again when the holder's key is due
// to expire (its PTTL plus up to a tenth of it at random, at most about the
// TTL).
//
// Connection errors are retried (with jittered exponential backoff from
// 50 ms to 1 s) for up to the TTL; a *recipe.OpError is returned when they
// last longer. Errors: ctx's cause, recipe.ErrSessionClosed (Close
// started), a *recipe.OpError, which wraps a *PermissionError (matching
// recipe.ErrNoPermission) when the server's ACL refused a right. No error
// leaves a key or a queue entry behind: when a request's answer was lost
// (or a grant came after ctx ended, or the call had joined the queue), the
// owner-checked delete is done before Acquire returns, whatever ctx has
// become, bounded by a third of the TTL (one request); only when the server
// can't be reached does it go on in the background, and the key, if the
// request made one, expires within the TTL anyway.
//
// # Close
//
// [Session.Close] ends the session: waiting Acquire calls return
// recipe.ErrSessionClosed, every lease still live ends with that cause and
// its key is deleted (owner-checked, retried on connection loss up to the
// TTL, after which the key has expired anyway; with WithLockDelay this is an
// unclean end: the next holder serves the delay from the delete), and Close
// waits for the session's background work (renewals, cleanups) to end before
// it closes a client it owns. Later calls on the session, its locks or its
// leases return errors matching recipe.ErrSessionClosed (a lease's Release:
// recipe.ErrLeaseLost wrapping it). Close is idempotent; it returns the
// client's close error.
//
// # TLS
//
// [WithTLS] makes Connect speak TLS to the server, with a copy of cfg (nil:
// the system's roots, no client certificate). Give a client certificate in
// cfg.Certificates (or GetClientCertificate) for a server with
// tls-auth-clients yes, and the server's authority in cfg.RootCAs. The
// server's certificate is verified against the URL's host unless
// cfg.ServerName names another; InsecureSkipVerify without a
// VerifyConnection or VerifyPeerCertificate of one's own is refused
// (recipe.ErrBadOption), and so is a MaxVersion below TLS 1.2 (no version
// would be left); a MinVersion below TLS 1.2 is raised to it.
//
// TLS is used when the URL is rediss:// or WithTLS is given; WithTLS's
// configuration wins over rediss://'s (its skip_verify parameter included)
// and turns a redis:// URL into TLS too: a Session asked for TLS never
// talks in plaintext, WithDialer included (the dialer's connection carries
// the TLS). A server certificate that fails verification makes Connect fail
// with an error from which errors.As extracts the
// *tls.CertificateVerificationError. Not accepted by NewSession (configure
// the client's TLSConfig instead).
//
// # Why MinTTL is a second
//
// [MinTTL] is the shortest TTL WithTTL accepts. The holder's lease context
// ends 2/3 of the TTL after the send of its last successful renewal; the
// server expires the key the TTL after it ran that renewal, which is later.
// The third in between (333 ms here) must absorb what can make the holder
// learn late: its deadline timer firing late (scheduling delay of a loaded
// machine, GC, -race: tens of milliseconds, more on an overloaded one) and
// the two clocks' rates (the client's monotonic clock against the server's
// wall clock, which a time daemon slews by at most 500 ppm: 1 ms per second
// of TTL in all). Nothing else is in the margin: the deadline counts from
// the send, before the server runs the request, and a key never expires
// early (unless the server's clock is stepped forward). At 100 ms, a margin
// of 33 ms, two holders overlapped once on a loaded 2-core machine; 1 s is
// also pglock's minimum. Pauses longer than the margin are what fencing is
// for.
package redislock
