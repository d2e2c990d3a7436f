package recipe

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Group membership (Curator's GroupMember and PersistentNode, kazoo's
// Party): each member registers under a unique id with some data, the
// registration lives while the process does (it is made again after a
// session loss), and anyone can read or watch the group as the server held
// it. Implemented by package group (ZooKeeper) and etcdlock.Group; checked
// by testkit/grouptest.

// Errors of group membership. Each matches with errors.Is.
var (
	// ErrMemberExists: another live registration holds the id (Join's error;
	// the cause of a registration that could not be made again while the id
	// was taken, which the member keeps retrying).
	ErrMemberExists = errors.New("recipe: member id held by another registration")

	// ErrConflict is returned by Member.Update when the member's entry was
	// written by someone else since this member last wrote it: nothing is
	// written.
	ErrConflict = errors.New("recipe: entry written by someone else")

	// ErrLeft is returned by a Member's methods after Leave, and is the
	// Cause of the final Registration a listener receives.
	ErrLeft = errors.New("recipe: member left the group")
)

// MaxMemberID is the longest member id, in bytes.
const MaxMemberID = 128

// CheckMemberID returns nil for a valid member id: 1 to MaxMemberID bytes
// of UTF-8, no control character, no '/', not "." or "..". Otherwise an
// error matching ErrInvalidPath.
func CheckMemberID(id string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: member id %.40q: %s", ErrInvalidPath, id, why)
	}
	switch {
	case id == "":
		return bad("empty")
	case len(id) > MaxMemberID:
		return bad(fmt.Sprintf("longer than %d bytes", MaxMemberID))
	case !utf8.ValidString(id):
		return bad("not UTF-8")
	case id == "." || id == "..":
		return bad("a relative path segment")
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f || r == '/' {
			return bad("a control character or '/'")
		}
	}
	return nil
}

// Group is a group of members of one backend. Its methods are safe for
// concurrent use.
type Group interface {
	// Join registers the caller as member id carrying data, and returns once
	// the registration exists; it lives until Leave or the Session's Close,
	// made again after every loss (see Member). Errors: ErrMemberExists
	// while another live registration holds id; ErrInvalidPath for a bad id
	// (CheckMemberID); ErrTooLarge or ErrBadOption for data the backend
	// cannot carry; ctx's cause; the backend's errors. An error leaves
	// nothing behind.
	Join(ctx context.Context, id string, data []byte) (Member, error)
	// Members returns the group as the server held it at one point of its
	// order, sorted by id. Entries that are not members (foreign keys or
	// nodes) are left out.
	Members(ctx context.Context) (View, error)
	// Watch delivers the group at once (the first View, Synced) and after
	// each change, as whole Views in the server's order: coalesced (a slow
	// reader skips views but gets the latest), never one with a Rev below
	// the last delivered. The channel closes when ctx ends, the Session
	// closes, or reading fails for good (logged). A nil ctx never ends.
	Watch(ctx context.Context) <-chan View
}

// View is the group at one point of the server's order.
type View struct {
	// Rev orders views: a later state of the group has a larger Rev (the
	// ZooKeeper zxid or etcd revision of its last change, or later).
	Rev int64
	// Members, sorted by ID; each id appears once.
	Members []MemberInfo
}

// MemberInfo is one member as a View shows it.
type MemberInfo struct {
	ID   string
	Data []byte
	// Since is the creation revision of the member's current registration
	// (ZooKeeper czxid, etcd create revision): it changes when the member
	// registers again, so it tells incarnations apart.
	Since int64
}

// Member is one registration, made by Group.Join. Its methods are safe for
// concurrent use.
type Member interface {
	// ID returns the member's id.
	ID() string
	// Registered waits until the registration exists and returns a context
	// that ends as soon as it is in doubt or lost (cause ErrSuspended,
	// ErrSessionLost, ErrNodeDeleted, ErrSessionClosed; ErrReleased after
	// Leave): work that
	// must stop when the member might be dropped by others watches it. The
	// member registers again by itself. Errors: ctx's cause; ErrLeft; the
	// error that stopped the member for good (Permanent).
	Registered(ctx context.Context) (context.Context, error)
	// Update replaces the member's data on its live registration (waiting
	// for one, as Registered), checked against the version this member last
	// wrote: ErrConflict if someone else wrote it since; a write whose reply
	// was lost is settled, not guessed. Registrations made after a nil
	// return carry data. After ErrConflict the entry is someone else's
	// write: Leave and Join again to own it. Errors as Registered, and the
	// backend's.
	Update(ctx context.Context, data []byte) error
	// Listen delivers every change of the registration from now on, in
	// order, the current one first; Leave or the member's end delivers a
	// final Registration (Registered false, Cause ErrLeft or why) and closes
	// the channel, as ctx's end does at once. A slow reader never blocks the
	// member; read until the channel closes or cancel ctx (a nil ctx never
	// ends), or its goroutine stays.
	Listen(ctx context.Context) <-chan Registration
	// Leave removes the registration for good, even if ctx is done (within
	// the backend's cleanup bound; what is not done then is done by the
	// server's expiry). Idempotent. Errors: an *OpError if the removal is
	// unconfirmed.
	Leave(ctx context.Context) error
}

// Registration is one change of a Member's registration.
type Registration struct {
	// Registered is true when a registration began, false when it ended or
	// is in doubt.
	Registered bool
	// Since is the registration's creation revision (MemberInfo.Since).
	Since int64
	// At is when the member observed the change.
	At time.Time
	// Cause says why it ended (nil when Registered).
	Cause error
}
