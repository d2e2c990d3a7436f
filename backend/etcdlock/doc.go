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
//
// # Connecting
//
// [Connect] opens a Session on the etcd cluster named by url:
//
//	etcd://host:port[,host:port...][/prefix]
//	etcds://host:port[,host:port...][/prefix]   (TLS: see WithTLS)
//
// The prefix (default: WithPrefix, else DefaultPrefix) is where the
// Session's locks keep their keys. Connect dials every endpoint first and
// fails at once with an error matching ErrUnreachable (and wrapping the dial
// errors) when none accepts a connection; then it grants the Session's first
// lease, waiting at most the connect timeout. The connection is plain for
// etcd:// and TLS for etcds:// or with WithTLS (the handshake is part of the
// first check); there is no authentication by user name and password: for
// that, configure a clientv3.Client yourself and use NewSession.
//
// A plain connection whose endpoint closes it at once and answers a TLS
// hello fails at once too, saying to use etcds:// or WithTLS.
//
// Errors: ErrBadURL, recipe.ErrBadOption, ErrUnreachable (a refused client
// certificate also matches recipe.ErrNoPermission), ctx's cause. A request
// that etcd's authentication refuses (no user name, a role without the
// key range, a token no longer valid) matches recipe.ErrNoPermission,
// here and at every acquisition (docs/backends.md, "Errors at connect").
//
// [NewSession] takes a clientv3.Client made by the caller instead: the
// Session does not close it, and it must stay open until the Session is
// closed.
//
// # Names
//
// [New] returns the lock named name on s. Its contenders' keys are
//
//	<prefix>/<name>/_lock_<32 random hex digits>
//
// A name is what every backend takes (not empty, valid UTF-8, no NUL byte)
// of at most MaxNameLen bytes, with one rule of this package's own: no
// element (part between "/") starts with "_lock_" or "_member_", which keeps
// every lock's keys apart from every other lock's, "a" from "a/b" included,
// and from every Group's (NewGroup takes the same names). A leading "/"
// is dropped ("/jobs/nightly" and "jobs/nightly" are the same lock), nothing
// else ("a/" and "a" are two locks). Other names return a *NameError
// (matching ErrInvalidName and recipe.ErrInvalidPath); nothing is sent to
// the server.
//
// Options (nil ones are skipped): WithLockDelay; a bad one returns an error
// matching recipe.ErrBadOption.
//
// # Acquire
//
// [Mutex.Acquire] puts a key of its own under the Session's current etcd
// lease (one transaction, which also reads the lock's first key: an
// uncontended grant is one request), then, while a key with a lower create
// revision exists, watches the deletion of the nearest lower one only,
// re-reading its position after every event, and after a TTL without one
// (a watch can stay silent under faults). It returns ErrNodeDeleted if
// its key is deleted by someone else while it waits. With WithLockDelay,
// once first it serves the lock-delay if the previous holder ended
// uncleanly, then records its grant before returning it.
//
// On any error its key is deleted before it returns, whatever ctx has
// become (one request; while the server is unreachable, it returns when the
// etcd lease is presumed lost or the cleanup timeout passes, and the delete
// goes on in the background), or goes with the lost etcd lease. An Acquire
// cancelled while its put is in flight waits for the put's answer and then
// deletes the key the same way, unless the put has met a connection error
// or no answer comes within a second: it then returns, and the key is
// deleted in the background when the answer comes (or goes with the etcd
// lease, within its TTL).
//
// # Who holds the lock
//
// [Mutex.Holder] reads the lock's holder (recipe.HolderObserver) in one
// linearizable transaction: the first key by create revision, limit 1,
// and with WithLockDelay the lock-delay's record (a contender serving a
// delay holds not: give an observer its contenders' option). ID is the
// key's value, the identity its Session published (WithIdentity, default
// "<hostname>:<pid>", or Mutex.Proclaim since); Token is the key's create
// revision, the Lease's token; Since is zero: etcd records no time. Another
// client's malformed value gives ErrBadHolder, with the state, its ID
// empty. [Mutex.ObserveHolder] does not poll: it reads, watches the range
// from the next revision, and reads again on an event that may change the
// holder, so a change is reported one read after its watch event. A watch
// silent for a TTL is checked by one read (a change a stalled watch missed
// is then reported at most a TTL late: 10 s by default); compaction is
// recovered by a read at once, a failed watch by one after a backoff of
// 50 ms to 1 s (logged at Warn).
//
// # Group membership
//
// [NewGroup] returns the group named name on s (recipe.Group): each member
// is one key, <prefix>/<name>/_member_<id>, put under the etcd lease of the
// member's Session, so that it goes when the process does. Members reads
// the group's range at one revision; Watch reads it, then follows it with
// an etcd watch from the next revision (compaction: read again at once; a
// cancelled or failing watch: read again after a short backoff, logged at
// Warn; a watch silent for a TTL: checked by one read of the range's count and
// newest key).
//
// A member's registration is a grant of the Session's etcd lease, as a
// Mutex's is: its Registered context ends (recipe.ErrSuspended) 2/3 of the
// TTL after the send of the newest keep-alive the server acknowledged, or
// at once when the server says the etcd lease is gone
// (recipe.ErrSessionLost), the key is deleted by someone else
// (recipe.ErrNodeDeleted) or the Session closes (recipe.ErrSessionClosed);
// the member then registers again by itself, under the Session's next etcd
// lease (a new Since). The two numbers, with the TTL T (DefaultTTL 10 s):
//
//   - a member that dies (kill -9) stays in others' Views until the server
//     expires its etcd lease: T after the last keep-alive it received (the
//     leader checks every 500 ms), so between 5/6 T and T + 0.5 s after the
//     death (keep-alives go every T/6); 8.3 to 10.5 s by default, 2.5 to
//     3.5 s with the tests' 3 s TTL;
//   - a live member cut off from etcd sees its Registered context end 2/3 T
//     after the send of its last acknowledged keep-alive, so between 1/2 T
//     and 2/3 T after the cut (5 to 6.7 s by default), always before the
//     server drops it (at least T/3 before): work bound to that context
//     stops before others can see the member gone.
//
// Measured with the tests' 3 s TTL: a cut-off member's context ended 1.8 to
// 2.0 s after the cut, and others dropped it 3.0 to 3.4 s after; a killed
// member was dropped 3.0 to 3.4 s after the kill.
//
// A member's Update is one transaction that writes the key if it is still
// the same registration (create revision) and unchanged since the member's
// last confirmed write (mod revision); otherwise recipe.ErrConflict, and
// the key keeps the other write. A write whose answer was lost is settled
// by the next answer, not guessed: it was ours if the key is one version
// past our last confirmed write, under our etcd lease, holding a value we
// sent since (a foreign write that matches all that left the key exactly as
// ours would have); when no answer comes before ctx ends, the error is a
// *recipe.OpError and the next Update settles it. A lost registration is
// logged at Warn by the Session's logger, as a Mutex's lost Lease is (it
// is not given to Metrics, whose events are the lock's).
//
// Names follow the lock names' rules (CheckName): a lock and a group of the
// same name live side by side, and no element of either may start with
// "_lock_" or "_member_", which keeps every lock's and group's key range
// apart from every other's.
//
// # Caches and values
//
// [NewCache] returns a cache of the key <prefix>/<name>, of it and the
// keys one segment below, or of it and every key below (recipe.Cache):
// the range is read at one revision, then followed by a watch from the
// next, each watch response applied whole, so that what the cache holds
// is always the range at one revision. A compacted or cancelled watch is
// recovered by reading the range again and reporting only the differences
// (docs/cache.md).
//
// [NewValue] returns a shared value, the key <prefix>/<name>/_value_
// (recipe.Value): Version is the key's mod revision, TrySet one
// transaction comparing it, and a write whose answer was lost is settled
// by reading the key's history back to the write that followed the
// expected version.
//
// The details. A try of TrySet that gets no answer, or a transient error,
// is settled by reading the key before anything is sent again: unchanged,
// it is sent again; otherwise the key's history is read back (up to 16
// writes) to the write that followed expected (for 0: the create of the
// key's current incarnation), and that write holding data means the put
// was applied, even if overwritten since (another writer's put of the same
// bytes over the same revision cannot be told from it, and leaves the key
// as this one would); else it conflicts. A compacted history that hides
// the answer, or a longer one, is an error, not a guess. A Cache's
// compacted or cancelled watch is recovered by reading the range again and
// emitting only the differences; a watch that closes is opened again after
// a backoff (logged at Warn), one silent for a TTL or more is checked by a
// small read, and the etcd client reconnects by itself. Keys the package
// reserves for its locks and groups (_lock_..., _member_...,
// _lockdelay_...) are held like any key, not left out: a cache shows the
// range as the server holds it (its limits count them too), and a cache of
// a group's or a lock's directory is a way to follow its members or
// contenders; only its root cannot be one (the name rules). What the cache
// holds, its limits, its listeners and its snapshots are the store every
// backend's cache shares (internal/cachestore, as package cache's);
// cache.go and cache_sync.go are what is etcd's.
//
// # Metrics
//
// [WithMetrics] installs m on the Session (default, and nil: none). Every
// event has kind "lock" and dir the lock's name as given to New:
// AcquireStarted and AcquireDone for every Acquire and TryAcquire, on the
// caller's goroutine; Waiting +1 and -1 around the time an Acquire waits
// behind another holder; LeaseLost when a granted Lease ends other than by
// its Release (with its context's cause); SessionState when an etcd lease
// is granted (CONNECTED for the first, RECONNECTED after) and when it is
// lost (SUSPENDED for a presumed loss, matching recipe.ErrSuspended; LOST
// otherwise), and one last LOST with recipe.ErrSessionClosed at Close.
// LeaseLost and SessionState may be called under the Session's locks.
// StaleRejected is never called (wire it at a fence.Guard).
//
// # TLS
//
// [WithTLS] makes Connect speak TLS to every endpoint, with a copy of cfg
// (nil: the system's roots, no client certificate). Give a client
// certificate in cfg.Certificates (or GetClientCertificate) for a server
// started with --client-cert-auth, and the server's authority in
// cfg.RootCAs. The certificate of each endpoint is verified against the
// endpoint's host unless cfg.ServerName names another; InsecureSkipVerify
// without a VerifyConnection or VerifyPeerCertificate of one's own is
// refused (recipe.ErrBadOption), and so is a MaxVersion below TLS 1.2 (no
// version would be left); a MinVersion below TLS 1.2 is raised to it.
//
// TLS is used when the URL is etcds:// or WithTLS is given; WithTLS's
// configuration wins over etcds://'s default one, and turns an etcd:// URL
// into TLS too: a Session asked for TLS never talks in plaintext. A server
// certificate that fails verification makes Connect fail at once, with an
// error matching ErrUnreachable from which errors.As extracts the
// *tls.CertificateVerificationError. Connect only: NewSession refuses it
// (configure the client you give it instead).
package etcdlock
