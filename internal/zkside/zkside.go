// Package zkside is the side door of package zookeeper: what the module's
// other packages (the recipes in mutex, election and latch, resource/fencezk,
// the commands, tests) need from the ZooKeeper engine and its users do
// not, kept out of zookeeper's exported API. Package zookeeper registers
// its side in its init (Register); this package cannot import zookeeper,
// so the functions take its types as any: a *zookeeper.Session or a
// *zookeeper.Queue (anything else panics).
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
	// *zk.CheckVersionRequest; its path with the chroot), fits the packet
	// limit, and whether the data it writes can be read back within it:
	// nil, an error matching recipe.ErrTooLarge that gives the sizes, or
	// recipe.ErrBadOption for another op. It sends nothing.
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
}

// Queue is what a sibling may do with a *zookeeper.Queue beyond its
// exported methods.
type Queue interface {
	// CheckNodeData reports whether a node of the queue may carry data:
	// nil, or an error matching recipe.ErrBadOption and
	// recipe.ErrTooLarge for data over zookeeper.MaxNodeData, or
	// recipe.ErrTooLarge when the create of such a node would be over the
	// packet limit. A recipe calls it where data is given (mutex.WithData,
	// a latch's id), so that the mistake shows there. It sends nothing.
	CheckNodeData(data []byte) error
	// Heads is what ObserveHeadAs observes.
	Heads() Observed
	// SetLockDelay gives the queue a lock-delay of d (mutex.WithLockDelay:
	// a queue of an exclusive Rule only), before its first use.
	SetLockDelay(d time.Duration)
}

// Observed is a queue's head as Observe observes it.
type Observed struct {
	Source any                 // a Source[zookeeper.Head]
	Go     func(f func()) bool // runs f on a goroutine the Session's Close waits for; false once it is closed
	Quit   <-chan struct{}     // closed when the Session is closed
	Log    *slog.Logger        // the Session's
	Dir    string              // the queue's directory, for the log
}

// Hooks is package zookeeper's side, set by Register.
type Hooks struct {
	Session      func(s any) Session // s: a *zookeeper.Session
	Queue        func(q any) Queue   // q: a *zookeeper.Queue; nil for a nil one
	ValidatePath func(p string) error
	// ValidateSequentialPath is ValidateSequentialPath's.
	ValidateSequentialPath func(p string) error
	NodeNames              any // func([]zookeeper.Participant) []zookeeper.NodeName
	NodeKind               func(name string) string
}

var hooks Hooks

// Register sets package zookeeper's side; its init calls it.
func Register(h Hooks) { hooks = h }

// SessionOf returns the side of s, a *zookeeper.Session.
func SessionOf(s any) Session { return hooks.Session(s) }

// QueueOf returns the side of q, a *zookeeper.Queue.
func QueueOf(q any) Queue { return hooks.Queue(q) }

// ValidatePath checks a znode path given to a recipe (zookeeper.NewQueue
// checks its directory so): absolute, not the root, no trailing slash, no
// empty, "." or ".." segment, no character ZooKeeper refuses, valid UTF-8,
// outside the reserved /zookeeper subtree, no segment named like a queue
// node or zookeeper.MarkerName (zookeeper.ErrReservedName). The error is a
// *zookeeper.PathError matching recipe.ErrInvalidPath.
func ValidatePath(p string) error { return hooks.ValidatePath(p) }

// ValidateSequentialPath checks the path of a sequential create: as
// ValidatePath, and that no name the server can make of it by appending a
// sequence is named like a queue node (zookeeper.ErrReservedName).
func ValidateSequentialPath(p string) error { return hooks.ValidateSequentialPath(p) }

// NodeNames returns the node names of ps (a Participants listing) as a
// Rule sees them, so that a tool can evaluate a Rule over it (the zero
// NodeName for a name outside the node-name grammar of its Kind). P and N
// are zookeeper.Participant and zookeeper.NodeName.
func NodeNames[P, N any](ps []P) []N { return hooks.NodeNames.(func([]P) []N)(ps) }

// NodeKind returns the kind of a child name in the queue-node grammar
// ("_c_<guid>-<kind><sequence>", any kind: a recipe's of this module, or
// another program's), or "" for a name outside it, which every recipe
// ignores: a tool can list what makes a recipe refuse a directory with
// recipe.ErrMixedRecipes.
func NodeKind(name string) string { return hooks.NodeKind(name) }

// ObserveHeadAs is zookeeper.Queue.ObserveHead delivering conv(head)
// instead of the head itself, with the same coalescing: a recipe's own
// view of the head (an election's leader) without a second goroutine or a
// second queue of values. conv runs on the observer's goroutine and must
// not block. H is zookeeper.Head. Errors: recipe.ErrBadOption for a nil q
// or conv (then the channel is nil).
func ObserveHeadAs[H, T any](ctx context.Context, q any, conv func(H) T) (<-chan T, error) {
	var side Queue
	if q != nil {
		side = QueueOf(q)
	}
	if side == nil || conv == nil {
		return nil, fmt.Errorf("%w: ObserveHeadAs needs a queue and a conversion", recipe.ErrBadOption)
	}
	return Observe(ctx, side.Heads(), conv), nil
}
