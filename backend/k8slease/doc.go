// Package k8slease is the Kubernetes backend of zkrecipes: a fenced,
// lease-bound exclusive lock (Mutex) on a coordination.k8s.io/v1 Lease
// object, the object client-go's leader election already uses. It
// implements recipe.Lock, so code written against recipe.Lock and
// recipe.Lease (leader.Run included) runs on Kubernetes as it runs on
// ZooKeeper, and passes the same conformance suite (testkit/locktest).
//
// # Recipe
//
// The recipe is client-go's leader election (tools/leaderelection with its
// LeaseLock) made into a lease in Chubby's sense, with a fencing token and
// a holder that stops before anyone else can start. The Lease's spec holds
// one holder: holderIdentity (the Session's identity and a grant number:
// every Acquire is its own contender), leaseDurationSeconds, acquireTime,
// renewTime and leaseTransitions, written as client-go writes them, so a
// client-go elector and this package respect each other's holder.
//
//   - A grant is one write: a create when the Lease does not exist, else an
//     update based on the version read (its resourceVersion), which the API
//     server applies only if the Lease has not changed since (optimistic
//     concurrency, an etcd transaction comparing the key's revision). Of
//     several contenders one write wins; the others get 409 Conflict.
//   - A contender writes when the Lease has no holder, or when the duration
//     written in it has passed since the contender first saw its current
//     version, timed on its own monotonic clock. The times written in the
//     Lease are never compared with the local clock. A deletion of a Lease
//     the contender last saw held is one more version: it waits the
//     duration after it first saw the Lease gone (see The guarantee).
//   - The holder renews every sixth of the duration with an update of
//     renewTime (and of its token: Who holds the lock) based on its newest
//     version; Release writes the Lease with
//     no holder (as client-go's ReleaseOnCancel does), based on it too.
//   - Waiters watch the Lease (a field selector on metadata.name) and read
//     it at least once per duration as a backstop. A Lease cannot queue:
//     waiters are not served in order (see Mutex).
//
// # The fencing token
//
// The token of a grant is the resourceVersion of the write that took the
// Lease. The API server's etcd storage sets it to etcd's revision of that
// write: one 64-bit counter for the whole keyspace, raised by every write,
// persisted with the data. So it grows with every grant, across holders,
// API server and etcd restarts, and a Lease deleted and created again.
// It relies on: the API server storing in etcd (Kubernetes calls
// resourceVersion opaque; an answer that is not a decimal number fails the
// acquisition with ErrBadResourceVersion), and etcd's revision never
// going back (a restore from a backup must bump it, etcdutl's
// --bump-revision). leaseTransitions is advanced by every grant too, for
// client-go and for people, but it restarts with a re-created Lease and is
// not the token.
//
// # The two numbers
//
// With D the lease duration: the holder's Lease context ends (cause
// recipe.ErrSuspended) 2D/3 after the send time of its newest acknowledged
// renewal (internal/grant.Deadline), and at once when a renewal or a watch
// event shows the Lease deleted or naming another holder
// (recipe.ErrNodeDeleted). A contender takes an unreleased Lease over no
// sooner than D after it first saw the version that renewal wrote, which
// was after the renewal was sent; a renewal after that version would have
// changed it and made the takeover's update fail. A held Lease's deletion
// counts the same way: D after the contender first saw it gone, which is
// after the delete, so after every renewal. So the holder gives up at
// least D/3 before anyone else can be granted, whatever the network delays
// and whatever the skew between the nodes' wall clocks: only the rates of
// the clocks matter, and D/3 covers far more drift than clocks have. With
// the default D of 15 s: context ended at most 10 s after a cut, the next
// grant no sooner than 15 s after the cut holder's last renewal was seen.
//
// # Rights
//
// The user needs get, watch, create and update on the Lease (the Role is in
// docs/backends.md). Before a lock's first grant, the Session asks the API
// server whether it may get, watch and update the Lease (a
// SelfSubjectAccessReview per verb); a missing verb fails the acquisition
// with a *PermissionError, as does a renewal refused later, which ends the
// lease at once. A watch refused later is logged once, and the lock goes on
// without it.
//
// # The guarantee
//
// While a Lease's context is not done, no other contender of this package
// has been granted the lock, except after a revocation by a third party.
//
// Revocation by a third party (an operator's delete of the Lease, or an
// update naming another holder or none) ends the holder's context when it
// learns of it: at its watch event, or at its next renewal (every D/6),
// refused; cut off, at its deadline. A contender that last saw the Lease
// held waits D after it first sees it deleted (a deleted Lease counts as
// held until then, like an unreleased version), so it is granted after
// the holder's context ended, however late the holder's watch event. A
// contender that did not (its first read finds no Lease, or it last saw
// it free) creates it at once: nothing on the server tells a Lease
// deleted under a holder from one never created. A holder cleared by an
// update is free to every contender at once: it reads as a Release.
// Those grants are not covered by the holder's deadline: the holder can
// be live until its watch event or next renewal, at most D/6 and a round
// trip after the change while it is reachable. Their token is larger: a
// fenced resource refuses the old holder once the new one wrote.
//
// A client-go elector on the same Lease respects the holder too, but it
// has no fencing and may act after it lost the Lease (its OnStoppedLeading
// runs after the fact, and its renew deadline is measured on its own):
// fence the resource with this package's token.
// A Lease is a lease, not a mutex: a paused holder can resume after its
// context ended. Reject stale holders at the resource (package fence).
//
// # Connecting
//
// [Connect] works on a copy of cfg. A cfg that sets neither QPS nor
// RateLimiter gets no client-side rate limit (client-go's default is 5
// requests per second): a renewal held back by the client would eat into
// the holder's ownership deadline. The server's API priority and fairness
// still applies (docs/backends.md).
//
// # Waiting
//
// A Lease holds one holder and no queue: waiters are not served in order.
// When the Lease is released, every waiter's watch sees it and each sends
// its update; the API server applies the first and refuses the others
// (409 Conflict), which wait again. Under steady contention a waiter can
// lose every race (no FIFO, no bound on its wait).
//
// # Acquire
//
// [Mutex.Acquire] waits until the caller holds the lock, ctx ends, or the
// Session is closed (recipe.ErrSessionClosed). It takes the Lease when it
// has no holder (or does not exist: it creates it, unless this Session last
// saw it held: a deletion counts as a version), and otherwise once the
// duration written in it has passed since this Session first saw its current
// version, with an update that the API server applies only if the Lease has
// not changed since (its resourceVersion). Meanwhile it watches the Lease,
// and reads it again at least once per lease duration.
//
// The first acquisition of a lock on a Session asks the API server whether
// the user may get, watch and update its Lease: a *PermissionError (in a
// *recipe.OpError, matching recipe.ErrNoPermission) names what is missing,
// before anything is written. A namespace that does not exist is
// ErrNoNamespace.
//
// On any error, a Lease that its update may have taken is given up before
// it returns (whatever ctx has become: it waits for the answer of an
// update in flight, at most max(duration/6, 1 s) per try, and clears the
// holder within the cleanup timeout; past that in the background, and a
// contender takes the Lease over once its duration has passed).
//
// # Who holds the lock
//
// [Mutex.Holder] reads the Lease once (a GET). [Mutex.ObserveHolder] reads
// it, watches it from that version (a field selector on metadata.name) and
// reports each change as its event arrives; it reads and watches again
// when the watch ends (410 Gone included), after 50 ms doubling to 5 s.
// It polls in one case only: a Role without watch has it read the Lease
// every max(D, 5 s), D being the lease duration.
//
//   - ID is the Lease's holderIdentity as written: "<identity>#<grant
//     number>" for a holder of this package ([Session.Identity]: the host
//     name, or WithIdentity's prefix, and 16 random hex digits), a
//     client-go elector's Identity for its.
//   - Since is acquireTime, written by the holder with its own clock, not
//     by the server.
//   - Token is the grant's (The fencing token): the holder records it in
//     the Lease ([TokenAnnotation]) with each renewal, the first D/6 after
//     the grant; before that, the grant's own write shows it (acquireTime
//     equal to renewTime, which every renewal changes). A client-go
//     elector records none: after its first renewal its grant shows Token
//     0, unless an observer saw the grant's write.
//   - A Lease naming a holder is free once this Session has seen it
//     unchanged for the duration written in it (at least the Session's):
//     when its contenders would take it over. The times in the Lease are
//     not compared with the local clock. So a holder that stops renewing is
//     shown free D after its last renewal was seen, 5D/6 to D after it
//     stopped (12.5 to 15 s by default), and a Session's first read of an
//     abandoned Lease shows it held, until D after that read.
//
// There is no Proclaim: holderIdentity is the one field client-go electors
// compare, and it already is the published identity; a value beside it
// would be an annotation that a client-go elector's take leaves behind,
// stale, under another holder.
package k8slease
