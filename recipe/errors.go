package recipe

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every backend of this module (ZooKeeper, etcd,
// PostgreSQL, Redis, memlock) returns these for the same situations, so that
// code written against Lock and Lease can test for them with errors.Is
// whatever the backend; a backend's own errors (a go-zookeeper sentinel such
// as zk.ErrNoAuth, election.ErrNoLeader, ...) and context errors are
// reachable beside them. "Entry" below is a backend's record of a grant or
// a waiter (a znode, an etcd or Redis key, an advisory lock), "session" its
// server-side liveness (a ZooKeeper session, an etcd lease, a PostgreSQL
// connection, a Redis key's expiry).
var (
	// ErrLocked is returned by TryAcquire when another participant holds the
	// lock (or all permits). Nothing of the caller (znode, key) is left
	// behind.
	ErrLocked = errors.New("recipe: held by another participant")

	// ErrLeaseLost is returned by Lease.Release after ownership was lost
	// (session lost, connection suspended past the policy, own entry deleted).
	// Release then deletes nothing itself; context.Cause of the lease context
	// tells why ownership ended.
	ErrLeaseLost = errors.New("recipe: lease lost")

	// ErrSessionLost means the session that owned a grant is gone: a
	// ZooKeeper session expired, or presumed expired because no server
	// replied within the session timeout (for the other backends: an etcd
	// lease the server no longer has, a PostgreSQL connection that failed).
	// Everything granted under that session is lost.
	ErrSessionLost = errors.New("recipe: session lost")

	// ErrSessionClosed is returned by operations on a closed Session, and is
	// the cause of every lease context still live when Close ran.
	ErrSessionClosed = errors.New("recipe: session closed")

	// ErrSuspended is the cause of a lease context ended because the
	// connection to ZooKeeper was suspended (Curator's SUSPENDED) under the
	// session's suspension policy, or, for the other backends, because no
	// keep-alive or renewal was answered in time: ownership is in doubt.
	ErrSuspended = errors.New("recipe: connection suspended")

	// ErrNodeDeleted means the caller's own znode (or key) vanished while its
	// session lived (deleted by an operator or another client). It is the
	// cause of a lease context ended that way and is returned by Acquire when
	// a waiter's node disappears.
	ErrNodeDeleted = errors.New("recipe: own entry deleted")

	// ErrReleased is the cause of a lease context ended by Lease.Release.
	ErrReleased = errors.New("recipe: lease released")

	// ErrInvalidPath is matched by every *PathError.
	ErrInvalidPath = errors.New("recipe: invalid path")

	// ErrUnreachable is returned by Connect when no server of the ensemble
	// established a session before the connect timeout or ctx ended; the
	// other backends (etcd, PostgreSQL, Redis) return it when their server
	// cannot be reached, so its text names no backend.
	ErrUnreachable = errors.New("recipe: server unreachable")

	// ErrNoPermission is matched (together with zk.ErrNoAuth,
	// zk.ErrInvalidACL or zk.ErrAuthFailed) when ZooKeeper refused an
	// operation because of ACLs, or refused the credentials of WithAuth.
	ErrNoPermission = errors.New("recipe: refused by the server's access control")

	// ErrBadOption is matched by errors for invalid option values.
	ErrBadOption = errors.New("recipe: invalid option")

	// ErrMixedRecipes is matched by the error of an acquisition whose
	// directory holds nodes this module created for a different recipe
	// (another node kind: a mutex's "lock-" nodes beside a semaphore's
	// "lease-" nodes, say). Each recipe would ignore the other's nodes and
	// both would grant at once, so the acquisition refuses instead (its own
	// node deleted). Give each recipe a directory of its own. Children that
	// are not in this module's name grammar are ignored, as Curator does.
	ErrMixedRecipes = errors.New("recipe: the directory holds another recipe's nodes")

	// ErrTooLarge is matched by the error of an operation whose request
	// would not fit in one ZooKeeper packet: over the Session's packet
	// limit (WithMaxPacket: the servers' jute.maxbuffer, DefaultMaxPacket
	// unless they were configured otherwise). A path that long is refused
	// where it is given (NewQueue, and so mutex.New and the other
	// constructors), node data where it is given or at the call. A server
	// drops the connection of a client that sends such a request, which the
	// client cannot tell from a network failure and which fails every other
	// request in flight on it, so nothing over the limit is ever sent: the
	// request fails before it leaves, once, and the connection and every
	// other operation go on unaffected. With a limit above DefaultMaxPacket
	// it also ends an operation whose request over DefaultMaxPacket lost
	// its connection right after it was sent, twice in a row (see
	// WithMaxPacket).
	ErrTooLarge = errors.New("recipe: request over the ZooKeeper packet limit")
)

// Permanent reports whether err is one that retrying the same operation
// cannot cure: only a change by someone (the program's configuration, the
// ZooKeeper ACLs, the other recipe's nodes on the path) can. It matches
// ErrMixedRecipes, ErrTooLarge, ErrBadOption, ErrInvalidPath,
// ErrNoPermission and ErrSessionClosed. leader.Run, election.Run, the
// leader latch and ObserveHead stop on such an error instead of retrying
// it, ErrMixedRecipes only when the next attempt, after the loop's
// backoff, meets it too (another recipe's node can be on the path for a
// moment only); a loop of the caller's own should too.
func Permanent(err error) bool {
	for _, p := range []error{ErrMixedRecipes, ErrTooLarge, ErrBadOption, ErrInvalidPath, ErrNoPermission, ErrSessionClosed} {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}

// ShortPath returns p as the messages and log lines of this module show a
// znode path: p itself, or, when it is longer than 200 bytes (a path may be
// up to a packet long), its first 64 bytes, "…" and its length. Recipes
// built on a Session use it for the paths they log or put in errors.
func ShortPath(p string) string {
	if len(p) > 200 {
		return fmt.Sprintf("%s… (%d bytes)", p[:64], len(p))
	}
	return p
}

// OpError describes a failed operation of a backend: which operation, on
// what, and the underlying error, which stays reachable with errors.Is /
// errors.As (zk.ErrNoAuth, an etcd or gRPC status error, a *net.OpError,
// ...). Every backend of this module returns it for requests the server
// refused or that could not be confirmed.
type OpError struct {
	// Op is the operation in the backend's own terms: "create",
	// "children", "get", "delete", "exists", "sync" (ZooKeeper); "grant",
	// "put", "get", "delete" (etcd); "pg_advisory_lock", "token bump",
	// "pg_advisory_unlock" (PostgreSQL); "connect", "acquire", "release"
	// (Redis).
	Op string
	// Path is what the operation acted on: a znode path relative to the
	// session's chroot, an etcd or Redis key, a PostgreSQL lock name; ""
	// when nothing in particular (a connect).
	Path string
	Err  error
}

// Error implements error. A path longer than 200 bytes is shortened; the
// "recipe: " that starts the message is not repeated for Err.
func (e *OpError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("recipe: %s: %s", e.Op, unprefixed(e.Err))
	}
	return fmt.Sprintf("recipe: %s %s: %s", e.Op, ShortPath(e.Path), unprefixed(e.Err))
}

// Unwrap returns the underlying error.
func (e *OpError) Unwrap() error { return e.Err }

// prefix starts the message of every error of this module's packages.
const prefix = "recipe: "

// unprefixed is err's message without a leading prefix.
func unprefixed(err error) string { return strings.TrimPrefix(err.Error(), prefix) }
