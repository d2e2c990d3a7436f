// Package grouptest is a conformance suite for implementations of the
// backend-neutral group membership interface, recipe.Group and
// recipe.Member.
//
// A backend plugs in through a [Harness]: it creates clients, each a
// recipe.Group on its own session (its own process, as far as the backend
// can tell), with hooks that crash a client or cut it off from the backend,
// and it counts the entries a group holds in the backend. [Run] then checks,
// each property in its own subtest (so a failing backend sees which one
// broke):
//
//   - Basics: a member that joined is in another client's Members (its id,
//     data and a positive Since), Registered returns a live context, Listen
//     delivers the current registration first, Update changes the data others
//     read and keeps Since; Join of a held id by another client answers
//     ErrMemberExists, leaves nothing and leaves the holder alone; a bad id
//     ("", "a/b", "..", MaxMemberID+1 bytes) answers ErrInvalidPath and
//     leaves nothing; Leave ends the Registered context (ErrReleased) and
//     Listen (a final Registration with cause ErrLeft), removes the entry,
//     makes Registered and Update answer ErrLeft, and is idempotent; the id
//     can then be joined again, with a new Since.
//   - WatchOrderedAndConverges: a watcher's first View arrives at once and
//     shows the group; while members of three clients join, update and leave
//     concurrently, every delivered View is sorted by id with each id once,
//     no Rev is below the previous one, two Views with the same Rev are the
//     same; once the changes stop, the last View is what a fresh client's
//     Members returns, and that is the group the changes made.
//   - CrashedMemberDropped: the member of a crashed client stays in the
//     others' views right after the crash and for DeadVisible.Min, is dropped
//     by DeadVisible.Max, never comes back, and leaves no entry.
//   - CutOffContextEndsFirst: the member of a client cut off from the
//     backend sees its Registered context end (ErrSuspended or
//     ErrSessionLost) within CutOffContext, and before another client's
//     Watch drops it; Listen delivers that end; once healed the member
//     registers again by itself (Listen: Registered false, then true) and is
//     in the others' views again, with one entry: no View or Members ever
//     shows an id twice.
//   - NoDuplicateUnderRace: clients joining the same id at once: exactly one
//     succeeds, the others answer ErrMemberExists; one entry is left, none
//     after the winner's Leave.
//   - LeaveWithDoneContext: Leave with a context already done still removes
//     the registration (nil error, no entry left, the id free for another
//     client).
//
// The package depends on no particular backend: it imports recipe only.
// Package group runs it against ZooKeeper, and backend/etcdlock against
// etcd.
//
// Timing: the only timed assertions are those of [Bounds]: how long a
// crashed member stays visible (DeadVisible, both ways) and how soon a
// cut-off member's Registered context ends (CutOffContext). Every other wait
// is bounded only to turn a hang into a failure: by [OpTimeout] for steps
// that need no expiry, by twice the largest bound for steps that wait for
// one (or for a healed client to register again). Choose the bounds' Max
// with generous slack for loaded machines.
package grouptest

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Harness gives the suite access to one backend. A Harness serves one call
// of [Run]; its methods may be called from several goroutines at once.
type Harness interface {
	// NewClient returns a new client of the group named group, on its own
	// session. Clients created with the same name see the same group; the
	// suite uses a distinct name (lowercase letters, digits and dashes) for
	// each property and never reuses one within a Run. NewClient must
	// register the client's teardown (closing its session, freeing its
	// resources, whatever hooks were called on it) with tb.Cleanup, and fail
	// tb (tb.Fatal) if the client can't be created.
	NewClient(tb testing.TB, group string) Client

	// Leftovers returns how many entries the backend stores for the group
	// named group right now: one per registration, whichever client made
	// it, live or not yet expired. It is how the suite checks that refused
	// joins and left members leave nothing behind. It must observe the
	// backend directly (not through a client that may be cut off); errors
	// fail the test.
	Leftovers(ctx context.Context, group string) (int, error)

	// Bounds bounds how long a crashed member stays visible and how soon a
	// cut-off member learns that it may have been dropped.
	Bounds() Bounds
}

// Client is one participant: a recipe.Group on its own session, plus hooks
// that simulate failures of that participant only. The hooks must return
// promptly (not wait for the backend to react) and must not close the
// group: the suite keeps using a client after CutOff and Heal.
type Client interface {
	recipe.Group

	// Crash simulates the death of the client's process: its session ends
	// without leaving anything, as when a process is killed and the kernel
	// closes its connections. The backend must drop the client's members
	// only when its session or lease expires. After Crash the suite makes no
	// further calls on the client or its members; Crash is called at most
	// once.
	Crash()

	// CutOff partitions the client from the backend: the client keeps
	// running but none of its requests or keep-alives reach the backend and
	// no answer reaches it, until Heal. Its members' Registered contexts
	// must end before the others' views drop them.
	CutOff()

	// Heal ends CutOff: the client can reach the backend again and must
	// recover by itself (e.g. open a new session if its old one expired,
	// and register its members again).
	Heal()
}

// Bounds are the backend's timing bounds, counted from the Crash or CutOff
// call.
type Bounds struct {
	// DeadVisible bounds how long a crashed client's member stays in the
	// others' views (Watch, Members): not dropped sooner than Min (a member
	// dropped at once means the backend guessed that it died; one that is
	// only slow would then be dropped while alive), dropped by Max.
	DeadVisible Span
	// CutOffContext is the upper bound on how long a cut-off member's
	// Registered context stays live. For ZooKeeper it is the session
	// timeout plus slack; be generous. Must be positive.
	CutOffContext time.Duration
}

// Span is a range of durations.
type Span struct {
	// Min is a lower bound; zero only checks that the member is still
	// visible right after the crash.
	Min time.Duration
	// Max is an upper bound: be generous, it is a bound whose violation can
	// be caused by a slow machine. Must be positive.
	Max time.Duration
}

// OpTimeout bounds every step that should complete promptly on a healthy
// backend (a Join, a Leave, a Members or Leftovers call, a watcher seeing a
// change), so that a hang fails the test with a message instead of blocking
// it; waits that include an expiry are bounded by twice the largest bound
// instead. It is not a performance requirement.
const OpTimeout = 15 * time.Second

// Run checks every property listed in the package documentation against
// the backend behind h, each in a parallel subtest of t named after the
// property (t.Run, t.Parallel: each property uses a group of its own, and
// they finish after the caller's test function returns, before its Cleanup
// functions run). It fails t if h.Bounds() is not valid (DeadVisible with
// Max <= 0, Min < 0 or Min >= Max; CutOffContext <= 0).
func Run(t *testing.T, h Harness) {
	t.Helper()
	b := h.Bounds()
	if dv := b.DeadVisible; dv.Max <= 0 || dv.Min < 0 || dv.Min >= dv.Max || b.CutOffContext <= 0 {
		t.Fatalf("grouptest: invalid Bounds %+v: need 0 <= DeadVisible.Min < Max and CutOffContext > 0", b)
	}
	s := &suite{h: h, b: b}
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

type property struct {
	name  string
	check func(*suite, *testing.T)
}

var properties = []property{
	{"Basics", (*suite).basics},
	{"WatchOrderedAndConverges", (*suite).watchOrderedAndConverges},
	{"CrashedMemberDropped", (*suite).crashedMemberDropped},
	{"CutOffContextEndsFirst", (*suite).cutOffContextEndsFirst},
	{"NoDuplicateUnderRace", (*suite).noDuplicateUnderRace},
	{"LeaveWithDoneContext", (*suite).leaveWithDoneContext},
}
