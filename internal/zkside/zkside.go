// Package zkside is what package zookeeper lends the module's other
// packages beyond its exported API, typed: internal on purpose. Package
// zookeeper builds on it (it cannot import zookeeper): a *zookeeper.Session
// embeds a SessionDoor and a *zookeeper.Queue a QueueDoor, whose unexported
// methods make SessionOf and QueueOf accept exactly those types. Nothing is
// registered at init and nothing is asserted at run time: a wrong type does
// not compile.
//
// Everything a custom recipe on Queue needs is zookeeper's exported API
// (NewQueue and its Rule, Acquire, Join, Participants, ObserveHead,
// Queue.CheckNodeData, Session.Conn). What is here is internal on purpose:
//
//   - Session.Chroot, ACL, ACLRule, EnsureDir, CheckRequest, CheckMulti,
//     ValidatePath, ValidateSequentialPath: resource/fencezk writes znodes
//     of its own through Conn with the engine's rules (directories made as
//     the recipes make them, the directory ACL rule, the packet limit,
//     reserved names). They are the engine's rules, not a contract: they
//     may change with it, and a user writing znodes through Conn knows
//     the chroot and ACL they gave Connect.
//   - Session.Logger: a recipe of this module logs through the Session's
//     logger unless given its own; a custom recipe takes its own logger.
//   - Session.PendingCleanup: what tests check after a fault.
//   - Queue.SetLockDelay: the lock-delay's record (the marker znode beside
//     the queue nodes) assumes an exclusive Rule whose holder is the lowest
//     node; mutex.WithLockDelay is its public face.
//   - ObserveHeadAs: an election's view of the head delivered by
//     ObserveHead's own goroutine; a custom recipe converts ObserveHead's
//     values on its side.
package zkside

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// DefaultPort is the port of a server given without one: ZooKeeper's
// client port (Connect's server list).
const DefaultPort = 2181

// Session is what a sibling may do with a *zookeeper.Session beyond its
// exported methods.
type Session interface {
	// Chroot returns the chroot parsed from the server list ("" if none):
	// the prefix of every recipe path on the server.
	Chroot() string
	// Logger returns the Session's logger (zookeeper.WithLogger), for a
	// recipe built on the Session to log through by default.
	Logger() *slog.Logger
	// EnsureDir creates dir, a path below the chroot as every recipe path,
	// and its missing ancestors, as the recipes create their directories:
	// containers below the chroot (removed by the server once empty), the
	// chroot itself and its missing ancestors persistent, nothing above
	// the first existing ancestor. dir "/" stands for the chroot. acl is
	// the new znodes' ACL (nil: the Session's). It retries on connection
	// loss until ctx ends. made reports whether this call created dir
	// itself, with acl (false when it existed, or when the answer to the
	// create that made it was lost). Errors: a *zookeeper.PathError; an
	// *recipe.OpError naming the znode it could not create
	// (recipe.ErrNoPermission for an ACL refusal); recipe.ErrSessionClosed;
	// ctx's cause.
	EnsureDir(ctx context.Context, dir string, acl []zk.ACL) (made bool, err error)
	// CheckRequest reports whether op, a request about to be sent through
	// Conn (a *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest or
	// *zk.CheckVersionRequest, as zk.Conn.Multi takes them; its path with
	// the chroot), fits the packet limit, and whether the data it writes
	// can be read back within it: nil, an error matching
	// recipe.ErrTooLarge that gives the sizes, or recipe.ErrBadOption for
	// another op. It sends nothing.
	CheckRequest(op any) error
	// CheckMulti is CheckRequest for ops sent together in one Conn.Multi.
	CheckMulti(ops ...any) error
	// ACL returns the ACL the Session gives the znodes it creates
	// (zookeeper.WithACL; default world:anyone:cdrwa), for a sibling that
	// creates znodes of its own to default to it. It must not be modified.
	ACL() []zk.ACL
	// ACLRule applies zookeeper's rule for a queue directory someone else
	// made (zookeeper.ErrUntrustedDir) to any znode: existing is the ACL
	// of a znode that exists already, acl the one this Session would have
	// given it. It returns "" when every entry of existing grants its
	// identity only those of guard (zk.Perm* bits) that acl grants that
	// identity too (acl's world:anyone entries cover everyone, its "auth"
	// entries the Session's own identities) and existing grants this
	// Session need; otherwise the rule existing breaks, naming schemes,
	// users and permissions, never a digest's hash. Whether acl keeps any
	// of guard from others at all (else no znode can break the rule):
	// ACLRule(zk.WorldACL(guard), acl, guard, 0) != "". It sends nothing.
	ACLRule(existing, acl []zk.ACL, guard, need int32) string
	// PendingCleanup returns how many deletes of the Session's own znodes
	// wait for a reconnection (normally 0).
	PendingCleanup() int
	// ValidatePath checks a znode path given to a recipe (zookeeper.NewQueue
	// checks its directory so): see zkname.CheckPath. The error is a
	// *zookeeper.PathError matching recipe.ErrInvalidPath (and
	// zookeeper.ErrReservedName for a reserved segment).
	ValidatePath(p string) error
	// ValidateSequentialPath checks the path of a sequential create: as
	// ValidatePath, and that no name the server can make of it by
	// appending a sequence is named like a queue node
	// (zookeeper.ErrReservedName).
	ValidateSequentialPath(p string) error
}

// SessionDoor is embedded in zookeeper.Session (through an unexported
// alias): its unexported method is what SessionOf asks for.
type SessionDoor struct{ side Session }

// NewSessionDoor returns the door to side, a Session's.
func NewSessionDoor(side Session) SessionDoor { return SessionDoor{side} }

func (d SessionDoor) sessionSide() Session { return d.side }

// sessionHolder is a *zookeeper.Session.
type sessionHolder interface{ sessionSide() Session }

// SessionOf returns the side of s, a *zookeeper.Session.
func SessionOf(s sessionHolder) Session { return s.sessionSide() }

// Queue is what a sibling may do with a *zookeeper.Queue beyond its
// exported methods; H is zookeeper.Head.
type Queue[H any] interface {
	// Heads is what ObserveHeadAs observes.
	Heads() Observed[H]
	// SetLockDelay gives the queue a lock-delay of d (mutex.WithLockDelay:
	// a queue of an exclusive Rule only), before its first use.
	SetLockDelay(d time.Duration)
}

// QueueDoor is embedded in zookeeper.Queue (through an unexported alias):
// its unexported method is what QueueOf asks for.
type QueueDoor[H any] struct{ side Queue[H] }

// NewQueueDoor returns the door to side, a Queue's.
func NewQueueDoor[H any](side Queue[H]) QueueDoor[H] { return QueueDoor[H]{side} }

func (d QueueDoor[H]) queueSide() Queue[H] { return d.side }

// queueHolder is a *zookeeper.Queue.
type queueHolder[H any] interface{ queueSide() Queue[H] }

// QueueOf returns the side of q, a *zookeeper.Queue.
func QueueOf[H any](q queueHolder[H]) Queue[H] { return q.queueSide() }

// Observed is a queue's head as Observe observes it.
type Observed[H any] struct {
	Source Source[H]
	Go     func(f func()) bool // runs f on a goroutine the Session's Close waits for; false once it is closed
	Quit   <-chan struct{}     // closed when the Session is closed
	Log    *slog.Logger        // the Session's
	Dir    string              // the queue's directory, for the log
	What   string              // what is read, for the log ("" : "queue head")
}

// what is o.What or its default.
func (o Observed[H]) what() string {
	if o.What == "" {
		return "queue head"
	}
	return o.What
}

// ObserveHeadAs is zookeeper.Queue.ObserveHead delivering conv(head)
// instead of the head itself, with the same coalescing: a recipe's own
// view of the head (an election's leader) without a second goroutine or a
// second queue of values. conv runs on the observer's goroutine and must
// not block. H is zookeeper.Head. Errors: recipe.ErrBadOption for a nil q
// or conv (then the channel is nil).
func ObserveHeadAs[H, T any](ctx context.Context, q queueHolder[H], conv func(H) T) (<-chan T, error) {
	if q == nil || conv == nil {
		return nil, fmt.Errorf("%w: ObserveHeadAs needs a queue and a conversion", recipe.ErrBadOption)
	}
	return Observe(ctx, q.queueSide().Heads(), conv, nil), nil
}
