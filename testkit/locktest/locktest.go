// Package locktest is a conformance suite for implementations of the
// backend-neutral lock interface, recipe.Lock and recipe.Lease.
//
// A backend plugs in through a [Harness]: it creates clients, each a
// recipe.Lock on its own session (its own process, as far as the backend can
// tell), with hooks that crash a client or cut it off from the backend, and
// it counts the entries a lock leaves in the backend. [Run] then checks, each
// property in its own subtest (so a failing backend sees which one broke):
//
//   - Basics: TryAcquire answers ErrLocked while the lock is held, Release
//     ends the lease context with ErrReleased and is idempotent, the next
//     grant carries a larger token, Release with a context already done
//     still removes the grant and returns nil, and a released lock leaves
//     no entry.
//   - MutualExclusion: clients contending with Acquire and TryAcquire are
//     never holders at the same time; tokens grow with every grant; every
//     fenced write is accepted; nothing is left behind.
//   - CrashedHolderFreed: a crashed holder's lock is freed within its lease
//     time: not never (bounded by LeaseTime.Max), and not instantly (another
//     client is refused right after the crash, and the waiter is granted no
//     sooner than LeaseTime.Min).
//   - FencingRejectsStaleWriter: the "33/34" scenario: holder A (token 33)
//     pauses, its lease expires, B acquires (token 34) and writes; A resumes
//     and its write with 33 is rejected by the resource (fence.Guard).
//   - StaleReleaseKeepsNewHolder: a holder that lost its lease and calls
//     Release afterwards gets ErrLeaseLost and does not remove the new
//     holder's grant.
//   - OwnershipLossCancelsContext: a holder cut off from the backend sees its
//     lease context end (with an ownership-loss cause) within its lease time,
//     and before anyone else is granted the lock.
//   - CancellationLeavesNothing: Acquire calls that end by cancellation or
//     deadline (before or while waiting, or racing the request) and refused
//     TryAcquire calls return the context's cause or ErrLocked and leave no
//     entry behind; an Acquire of a free lock cancelled while its request is
//     in flight leaves nothing by the time it returns (another client's
//     TryAcquire right after it is granted), also on a lock nobody used yet.
//   - LeaderFailover: candidates elect a leader with the lock; the leader is
//     cut off, then the next one crashes, then the next one steps down; each
//     time exactly one new leader takes over, never while the previous
//     (live) leader's lease context is still live, and every leader's fenced
//     write is accepted.
//
// The package depends on no particular backend: it imports recipe for the
// interfaces and sentinel errors and fence for the resource-side check, and
// needs nothing else. Package backend/memlock runs it against its in-memory
// lease-based lock, and holds the suite's self-test: mutants of that lock,
// each broken in one way, must each fail exactly the property it breaks.
// Package mutex runs it against ZooKeeper, and the modules under backend/
// against etcd, PostgreSQL and Redis.
//
// Timing: the only timed assertions are the lease-time bounds of
// CrashedHolderFreed and the "not never" bounds of lease-context loss and
// leader failover, all taken from [LeaseTime]; every other wait is bounded
// only to turn a hang into a failure: by [OpTimeout] for steps that need no
// expiry, by twice LeaseTime.Max for steps that wait for one (or for a
// healed client to reconnect). Choose Max with generous slack for loaded
// machines.
package locktest

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Harness gives the suite access to one backend. A Harness serves one call of
// [Run]; its methods may be called from several goroutines at once.
type Harness interface {
	// NewClient returns a new client of the lock named lock, on its own
	// session. Clients created with the same name contend for the same lock;
	// the suite uses distinct names (lowercase letters, digits and dashes)
	// for each property (one, or several new ones for CancellationLeavesNothing)
	// and never reuses one within a Run. NewClient must
	// register the client's teardown (closing its session, freeing its
	// resources, whatever hooks were called on it) with tb.Cleanup, and fail
	// tb (tb.Fatal) if the client can't be created.
	NewClient(tb testing.TB, lock string) Client

	// Leftovers returns how many entries the backend stores for the lock
	// named lock right now: one per grant and, for backends that queue
	// waiters, one per waiter, whichever client created them. It is how the
	// suite checks that refused, cancelled and released attempts leave
	// nothing behind. It must observe the backend directly (not through a
	// client that may be cut off); errors fail the test.
	Leftovers(ctx context.Context, lock string) (int, error)

	// LeaseTime bounds how long a crashed or cut-off holder keeps the lock.
	LeaseTime() LeaseTime
}

// Client is one participant: a recipe.Lock on its own session, plus hooks
// that simulate failures of that participant only. The hooks must return
// promptly (not wait for the backend to react) and must not close the lock:
// the suite keeps using a client after CutOff and Heal.
type Client interface {
	recipe.Lock

	// Crash simulates the death of the client's process: its session ends
	// without releasing anything, as when a process is killed and the kernel
	// closes its connections. The backend must free the client's grants only
	// when its lease or session expires. After Crash the suite makes no
	// further calls on the client or its leases; Crash is called at most once.
	Crash()

	// CutOff partitions the client from the backend: the client keeps
	// running but none of its requests or keep-alives reach the backend and
	// no answer reaches it, until Heal. Its leases must end (lease context
	// done) before the backend grants the lock to anyone else.
	CutOff()

	// Heal ends CutOff: the client can reach the backend again and must
	// recover by itself (e.g. open a new session if its old one expired).
	Heal()
}

// LeaseTime bounds how long a lock granted to a client survives after that
// client crashes or is cut off, counted from the Crash or CutOff call.
type LeaseTime struct {
	// Min is a lower bound: after its holder crashed, the lock is not
	// granted to another client sooner than Min (a lock freed instantly
	// means the backend guessed that the holder died; a holder that is only
	// slow would then overlap with the next one). Zero only checks that the
	// lock is still held right after the crash.
	Min time.Duration
	// Max is an upper bound: a crashed holder's lock is granted to a waiter,
	// and a cut-off holder's lease context is done, within Max. For
	// ZooKeeper it is the session timeout plus slack for detection,
	// scheduling and a loaded machine; be generous, it is the only bound
	// whose violation can be caused by a slow machine. Must be positive.
	Max time.Duration
}

// OpTimeout bounds every step that should complete promptly on a healthy
// backend (an Acquire of a free lock, a Release, a Leftovers call), so that a
// hang fails the test with a message instead of blocking it; waits that
// include a lease expiry are bounded by twice LeaseTime.Max instead. It is
// not a performance requirement.
const OpTimeout = 15 * time.Second

// Run checks every property listed in the package documentation against the
// backend behind h, each in a parallel subtest of t named after the
// property (t.Run, t.Parallel: each property uses locks of its own, and
// they finish after the caller's test function returns, before its
// Cleanup functions run). It fails t if h.LeaseTime() is not valid
// (Max <= 0, Min < 0 or Min >= Max).
func Run(t *testing.T, h Harness) {
	t.Helper()
	run(t, h, false)
}

// run runs every property, or only the wire ones.
func run(t *testing.T, h Harness, wireOnly bool) {
	t.Helper()
	lt := h.LeaseTime()
	if lt.Max <= 0 || lt.Min < 0 || lt.Min >= lt.Max {
		t.Fatalf("locktest: invalid LeaseTime %+v: need 0 <= Min < Max", lt)
	}
	s := &suite{h: h, lt: lt}
	// The properties mostly wait (for a lease to expire, a client to
	// reconnect), each on locks of its own: they are parallel subtests, as
	// many at once as go test's -parallel allows (a package whose tests
	// only wait raises it; at the default, the number of CPUs, a backend
	// that one server serves to many packages is not flooded).
	for _, p := range properties {
		if p.wire || !wireOnly {
			t.Run(p.name, func(t *testing.T) {
				t.Parallel()
				p.check(s, t)
			})
		}
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
	// wire: the property exercises the connection itself (dial, a closed
	// connection, a cut one), so it runs again on another transport
	// (RunTransport); the others check the backend's logic, which the
	// transport does not change.
	wire bool
}

var properties = []property{
	{"Basics", (*suite).basics, true},
	{"MutualExclusion", (*suite).mutualExclusion, false},
	{"CrashedHolderFreed", (*suite).crashedHolderFreed, true},
	{"FencingRejectsStaleWriter", (*suite).fencingRejectsStaleWriter, false},
	{"StaleReleaseKeepsNewHolder", (*suite).staleReleaseKeepsNewHolder, false},
	{"OwnershipLossCancelsContext", (*suite).ownershipLossCancelsContext, true},
	{"CancellationLeavesNothing", (*suite).cancellationLeavesNothing, false},
	{"LeaderFailover", (*suite).leaderFailover, false},
}

// RunTransport runs the properties that exercise the connection (Basics,
// CrashedHolderFreed, OwnershipLossCancelsContext: a grant, a client whose
// connection closes, one cut off) against h, for a backend's second
// transport (TLS) once Run passes on its first: the rest check the
// backend's own logic, which a transport does not change, and would only
// lengthen the suite.
func RunTransport(t *testing.T, h Harness) {
	t.Helper()
	run(t, h, true)
}
