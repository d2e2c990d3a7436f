package recipe

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/go-zookeeper/zk"
)

// Sentinel errors. Every error returned by this module's recipes matches one
// of these (or a go-zookeeper sentinel such as zk.ErrNoAuth, a context error,
// or a sentinel of the recipe's own package: election.ErrNoLeader,
// election.ErrCampaigning, latch.ErrClosed, ...) with errors.Is. The other
// backends (etcd, PostgreSQL, Redis, memlock) return the same sentinels for
// the same situations, so that code written against Lock and Lease can test
// for them whatever the backend; the ZooKeeper terms below (znode, session)
// stand for each backend's own (key, etcd lease, connection).
var (
	// ErrLocked is returned by TryAcquire when another participant holds the
	// lock (or all permits). Nothing of the caller (znode, key) is left
	// behind.
	ErrLocked = errors.New("recipe: held by another participant")

	// ErrLeaseLost is returned by Lease.Release after ownership was lost
	// (session lost, connection suspended past the policy, own znode deleted).
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
	ErrNodeDeleted = errors.New("recipe: own znode deleted")

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
	ErrNoPermission = errors.New("recipe: refused by ZooKeeper ACL")

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

// PathError reports an invalid znode path. It matches ErrInvalidPath, and
// Err when set (ErrTooLarge for a path too long for the packet limit).
type PathError struct {
	Path   string // the path as given
	Reason string // what is wrong with it
	Err    error  // the kind of problem beyond ErrInvalidPath, if any
}

// Error implements error. A path longer than 200 bytes is shortened.
func (e *PathError) Error() string {
	p := fmt.Sprintf("%q", e.Path)
	if len(e.Path) > 200 {
		p = fmt.Sprintf("%q… (%d bytes)", e.Path[:64], len(e.Path))
	}
	return fmt.Sprintf("recipe: invalid path %s: %s", p, e.Reason)
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

// errorf is fmt.Errorf for an error of this package that wraps others of
// it: the message names the package once ("recipe: invalid option: request
// over the ZooKeeper packet limit: ..."), dropping the "recipe: " prefix of
// every wrapped error's message after the first (or after the format's own
// prefix). errors.Is and errors.As see every wrapped error, as with
// fmt.Errorf.
func errorf(format string, args ...any) error {
	shown := make([]any, len(args))
	seen := strings.HasPrefix(format, prefix)
	for i, a := range args {
		shown[i] = a
		if e, ok := a.(error); ok {
			if seen {
				shown[i] = unprefixed(e)
			}
			seen = true
		}
	}
	return &prefixedOnce{err: fmt.Errorf(format, args...), msg: fmt.Sprintf(strings.ReplaceAll(format, "%w", "%v"), shown...)}
}

// prefix starts the message of every error of this package.
const prefix = "recipe: "

// unprefixed is err's message without a leading prefix.
func unprefixed(err error) string { return strings.TrimPrefix(err.Error(), prefix) }

// prefixedOnce is an error of errorf.
type prefixedOnce struct {
	err error // what fmt.Errorf made of it: the wrapping
	msg string
}

func (e *prefixedOnce) Error() string { return e.msg }
func (e *prefixedOnce) Unwrap() error { return e.err }

// Is makes a *PathError match ErrInvalidPath.
func (e *PathError) Is(target error) bool { return target == ErrInvalidPath }

// Unwrap returns Err.
func (e *PathError) Unwrap() error { return e.Err }

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

// Is makes ZooKeeper's ACL refusals match ErrNoPermission as well, and a
// request that go-zookeeper could not fit in its send buffer
// (zk.ErrShortBuffer: sized to the packet limit, see WithMaxPacket)
// ErrTooLarge.
func (e *OpError) Is(target error) bool {
	switch target {
	case ErrNoPermission:
		return errors.Is(e.Err, zk.ErrNoAuth) || errors.Is(e.Err, zk.ErrInvalidACL) || errors.Is(e.Err, zk.ErrAuthFailed)
	case ErrTooLarge:
		return errors.Is(e.Err, zk.ErrShortBuffer)
	}
	return false
}

// isConnErr reports whether err is a transient connection-level failure after
// which a request may or may not have been applied by the server.
//
// Besides go-zookeeper's sentinels this includes raw network errors:
// go-zookeeper hands a failed socket write to the waiting request as is.
func isConnErr(err error) bool {
	if err == nil {
		return false
	}
	var ne *net.OpError
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved) ||
		errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrClosedPipe) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// isClosing reports whether err means the client was closed.
func isClosing(err error) bool { return errors.Is(err, zk.ErrClosing) }
