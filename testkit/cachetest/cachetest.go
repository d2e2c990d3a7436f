// Package cachetest is a conformance suite for implementations of the
// backend-neutral cache interface, recipe.Cache.
//
// A backend plugs in through a [Harness]: it makes caches of a test root in
// a mode, writes and deletes nodes through another client, maps the
// suite's relative paths ("root/a/b") to its Node.Path, and may offer fault
// hooks. [Run] then checks, each property in its own subtest:
//
//   - InitialContent: a cache made after the writes holds them: Snapshot,
//     Get and a listener's NodeCreated events before CacheInitialized show
//     exactly what was written in the mode's share, each node with Created
//     > 0 and Modified >= Created.
//   - ModesHoldTheirShare: caches of the three modes on one root, while
//     nodes are written at every depth below it and beside it (a sibling
//     "root-s" and its child): each holds its root and, by its mode, nothing
//     else, its direct children, or every node below; no listener ever sees
//     a node outside its share.
//   - HistoryTree, HistoryChildren, HistoryNode: a sequential writer makes
//     the history S0..Sn of a subtree (random creates, updates, deletes;
//     each write's data unique) while a cache follows it, a goroutine takes
//     Snapshots and Gets, an early listener (before the cache is loaded)
//     and a late one (half way) record events. Every Snapshot equals some
//     Si (in the mode's share), i never going back from one to the next,
//     and Rev never going back (one Rev, one content); the cache converges
//     to Sn. Each listener's events, applied in order to an empty map, give
//     at CacheInitialized (after NodeCreated events only) one of the Si and
//     at the end Sn; along the way a NodeCreated is for a node not held, a
//     NodeChanged or NodeDeleted for one held (a deletion carries the state
//     held), per node the data written never goes back in the writer's
//     order, Modified never goes back for one Created and Created never
//     goes back, Rev never goes back; a node's Get never goes back either.
//   - LateListener: a listener of a loaded cache gets its content as
//     NodeCreated events, then CacheInitialized, then the changes.
//   - ListenContext: a listener's channel closes when its context ends, the
//     cache and its other listeners going on.
//   - Limit: a cache whose content would exceed its node limit stops with
//     ErrCacheFull (Err, Snapshot), its listeners' channels closed; one made
//     over a range already too large does too; below the limit nothing
//     stops.
//   - Close: Close closes every listener's channel, Err is then
//     ErrSessionClosed, so is Snapshot's error, Listen returns a closed
//     channel, and a second Close returns nil.
//   - Disconnect and LoseSession: the history check above with the fault of
//     [Faults] of that name injected half way: the cache converges to Sn,
//     its listener with no event going back, and Err stays nil. A hook the
//     backend leaves nil skips its subtest (t.Skip, with the reason).
//
// The package depends on no particular backend: it imports recipe only.
// backend/etcdlock runs it against etcd.
//
// Timing: nothing is timed; every wait is bounded by [OpTimeout] only to
// turn a hang into a failure.
package cachetest

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Harness gives the suite access to one backend. A Harness serves one call
// of [Run]; its methods may be called from several goroutines at once.
//
// Paths are relative to a base of the harness's choosing ("history-tree",
// "history-tree/a/x"): the suite uses a distinct root (lowercase letters,
// digits and dashes) for each property, and writes below it and beside it
// (root + "-s").
type Harness interface {
	// NewCache returns a cache of the node at root in mode, holding at most
	// maxNodes nodes (0: the backend's default), on a session of its own
	// (not the writer's). It returns at once, as the caches do (it need not
	// wait for the load); the harness closes the cache and its session at
	// tb's cleanup, and fails tb (tb.Fatal) if it can't make one.
	NewCache(tb testing.TB, root string, mode recipe.CacheMode, maxNodes int) recipe.Cache

	// Put creates the node at path with data, or overwrites its data, and
	// returns once the backend acknowledged it, through a client of its own.
	// The suite writes a node's parent before the node (a root's parent,
	// the base, must exist). Errors fail tb.
	Put(tb testing.TB, path string, data []byte)

	// Delete deletes the node at path, which exists and has no children,
	// and returns once the backend acknowledged it. Errors fail tb.
	Delete(tb testing.TB, path string)

	// Path maps a relative path to the Node.Path the backend's caches
	// report for it.
	Path(rel string) string

	// Faults returns the backend's fault hooks; any of them may be nil.
	Faults() Faults
}

// Faults are hooks that disturb one cache made by the Harness. Each starts
// its fault on the cache c (it may block until the fault is in effect, for
// at most a few seconds), and returns heal, which ends it and returns
// promptly; the cache must then recover by itself. A nil hook skips the
// subtest of its name.
type Faults struct {
	// Disconnect cuts the connection of c's session to the backend (the
	// connections close and no new one opens) until heal.
	Disconnect func(tb testing.TB, c recipe.Cache) (heal func())

	// LoseSession makes c's session be lost (expired, or presumed lost
	// by the client), returning once it is; heal lets it connect again.
	LoseSession func(tb testing.TB, c recipe.Cache) (heal func())
}

// OpTimeout bounds every wait of the suite (a cache converging, a listener
// catching up, a channel closing), so that a hang fails the test with a
// message instead of blocking it. It is not a performance requirement.
const OpTimeout = 15 * time.Second

// Run checks every property listed in the package documentation against
// the backend behind h, each in a parallel subtest of t named after the
// property (each property uses roots of its own; they finish after the
// caller's test function returns, before its Cleanup functions run).
func Run(t *testing.T, h Harness) {
	t.Helper()
	s := &suite{h: h}
	for _, p := range properties {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			p.check(s, t)
		})
	}
}

// Properties returns the names of the subtests Run runs, in order, e.g. for
// -run patterns or to check that a report covers all of them.
func Properties() []string {
	names := make([]string, len(properties))
	for i, p := range properties {
		names[i] = p.name
	}
	return names
}

type suite struct{ h Harness }

type property struct {
	name  string
	check func(*suite, *testing.T)
}

var properties = []property{
	{"InitialContent", (*suite).initialContent},
	{"ModesHoldTheirShare", (*suite).modesHoldTheirShare},
	{"HistoryTree", func(s *suite, t *testing.T) { s.history(t, "history-tree", recipe.CacheTree, nil) }},
	{"HistoryChildren", func(s *suite, t *testing.T) { s.history(t, "history-children", recipe.CacheChildren, nil) }},
	{"HistoryNode", func(s *suite, t *testing.T) { s.history(t, "history-node", recipe.CacheNode, nil) }},
	{"LateListener", (*suite).lateListener},
	{"ListenContext", (*suite).listenContext},
	{"Limit", (*suite).limit},
	{"Close", (*suite).close},
	{"Disconnect", func(s *suite, t *testing.T) { s.fault(t, "disconnect", "Disconnect", s.h.Faults().Disconnect) }},
	{"LoseSession", func(s *suite, t *testing.T) { s.fault(t, "losesession", "LoseSession", s.h.Faults().LoseSession) }},
}
