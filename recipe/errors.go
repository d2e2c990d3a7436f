package recipe

import (
	"errors"
	"fmt"
	"strings"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
)

// Sentinel errors, returned by every backend (ZooKeeper, etcd, PostgreSQL,
// Redis, memlock) for the same situations; a backend's own errors stay
// reachable beside them. An "entry" is a backend's record of a grant or a
// waiter (a znode, a key, an advisory lock), a "session" its liveness.
var (
	// ErrLocked is returned by TryAcquire when others hold the lock (or all
	// permits); nothing of the caller is left behind.
	ErrLocked = errors.New("recipe: held by another participant")

	// ErrLeaseLost is returned by Lease.Release after ownership was lost;
	// Release then removes nothing, and the lease context's cause says why.
	ErrLeaseLost = errors.New("recipe: lease lost")

	// ErrSessionLost: the session that owned a grant is gone (expired or
	// presumed expired; an etcd lease lost, a PostgreSQL connection failed).
	ErrSessionLost = errors.New("recipe: session lost")

	// ErrSessionClosed is returned by operations on a closed Session, and is
	// the cause of every lease context still live when Close ran.
	ErrSessionClosed = errors.New("recipe: session closed")

	// ErrSuspended is the cause of a lease context ended because ownership is
	// in doubt: ZooKeeper's connection SUSPENDED under the session's policy,
	// or no keep-alive or renewal answered in time on the other backends.
	ErrSuspended = errors.New("recipe: connection suspended")

	// ErrNodeDeleted: the caller's own entry vanished while its session lived
	// (the cause of such a lease's end; Acquire's error for such a waiter).
	ErrNodeDeleted = errors.New("recipe: own entry deleted")

	// ErrReleased is the cause of a lease context ended by Lease.Release.
	ErrReleased = errors.New("recipe: lease released")

	// ErrInvalidPath is matched by the error of every path or lock name a
	// backend refuses (zookeeper.PathError, the other backends' name errors).
	ErrInvalidPath = errors.New("recipe: invalid path")

	// ErrUnreachable is returned by Connect when no server could be reached
	// (ZooKeeper: no session before the connect timeout or ctx's end).
	ErrUnreachable = errors.New("recipe: server unreachable")

	// ErrNoPermission is matched, with zk.ErrNoAuth, zk.ErrInvalidACL or
	// zk.ErrAuthFailed, when ZooKeeper's ACLs or WithAuth's credentials refused.
	ErrNoPermission = errors.New("recipe: refused by the server's access control")

	// ErrBadOption is matched by errors for invalid option values.
	ErrBadOption = errors.New("recipe: invalid option")

	// ErrMixedRecipes is matched when a directory holds this module's nodes
	// of another recipe (a mutex's beside a semaphore's): both would grant, so
	// the acquisition refuses, its own node deleted. One recipe per directory.
	ErrMixedRecipes = errors.New("recipe: the directory holds another recipe's nodes")

	// ErrTooLarge is matched when a request would exceed what the server
	// takes (ZooKeeper: the Session's packet limit, WithMaxPacket; etcd: a
	// value's MaxValueData): a path where it is given, data where it is
	// given or at the call. Nothing over the limit is sent
	// (docs/recipes.md#sizes-paths-and-data-against-zookeepers-packet-limit).
	ErrTooLarge = errors.New("recipe: request over the server's size limit")
)

// Permanent reports whether retrying cannot cure err: ErrMixedRecipes,
// ErrTooLarge, ErrBadOption, ErrInvalidPath, ErrNoPermission,
// ErrSessionClosed or fence.ErrTokenOverflow (InEra). leader.Run, election.Run, the latch and Observe stop on
// it (on ErrMixedRecipes only when the next attempt meets it too).
func Permanent(err error) bool {
	for _, p := range []error{ErrMixedRecipes, ErrTooLarge, ErrBadOption, ErrInvalidPath, ErrNoPermission, ErrSessionClosed, fence.ErrTokenOverflow} {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}

// OpError describes a failed operation of a backend: which operation, on
// what, and the underlying error, which stays reachable with errors.Is /
// errors.As: a request the server refused or that could not be confirmed.
type OpError struct {
	// Op is the operation in the backend's terms ("create", "pg_advisory_lock").
	Op string
	// Path is what it acted on (a znode path, a key, a lock name), or "".
	Path string
	Err  error
}

// Error implements error. A path longer than 200 bytes is shortened; the
// "recipe: " that starts the message is not repeated for Err.
func (e *OpError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("recipe: %s: %s", e.Op, unprefixed(e.Err))
	}
	return fmt.Sprintf("recipe: %s %s: %s", e.Op, shortpath.Of(e.Path), unprefixed(e.Err))
}

// Unwrap returns the underlying error.
func (e *OpError) Unwrap() error { return e.Err }

// prefix starts the message of every error of this module's packages.
const prefix = "recipe: "

// unprefixed is err's message without a leading prefix.
func unprefixed(err error) string { return strings.TrimPrefix(err.Error(), prefix) }
