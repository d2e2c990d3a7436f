// Package valuetest is a conformance suite for implementations of the
// backend-neutral shared value, recipe.Value.
//
// A backend plugs in through a [Harness]: it creates clients, each a
// recipe.Value on its own session (its own process, as far as the backend
// can tell), names the data size the backend refuses, and optionally
// deletes a value behind the clients' backs ([Deleter]) and cuts a
// client's connection while its next write is in flight ([Cutter]). [Run]
// then checks, each property in its own parallel subtest:
//
//   - Absent: a value never written reads as Version 0 with nil Data, and
//     its Rev is not negative.
//   - CreateOnce: TrySet(0) creates the value (a positive Version, the data
//     another client's Get returns); a second TrySet(0), of another client,
//     answers recipe.ErrConflict and writes nothing.
//   - StaleVersionConflicts: a TrySet with the current version writes (a
//     larger Version and Rev); one with a stale version, or one never
//     reached, answers recipe.ErrConflict and writes nothing.
//   - ConcurrentAddsAllCount: several clients add 1 to a counter over the
//     value (package counter: a TrySet loop retried on conflicts) many
//     times each at once: the count is the number of adds, no more, no
//     less.
//   - WatchLatestInOrder: a watcher's first value arrives at once and is
//     the current one; while another client writes, every delivered value
//     has a Rev above the previous one and a Version not below it, and the
//     last one is the final write. With a Deleter: a deleted value is
//     delivered as Version 0 with a larger Rev, and the value made again
//     after it, with a larger Rev still. Cancelling the watch's ctx closes
//     the channel.
//   - TooLarge: TrySet of data of Harness.TooLarge bytes answers
//     recipe.ErrTooLarge and writes nothing.
//   - LostReplySettled: with a Cutter, a TrySet whose request is sent and
//     whose connection is then cut (its reply lost), and one whose
//     connection is cut before it is sent, both succeed exactly once: the
//     value holds the data at the returned version, and the version before
//     it is stale (recipe.ErrConflict). Skipped without a Cutter.
//
// The package depends on no particular backend: it imports recipe and
// counter only. Package value runs it against ZooKeeper, and
// backend/etcdlock against etcd. Goroutine leaks are the harness's test
// binary's to check (goleak in its TestMain): every watch the suite opens
// is cancelled, and its channel checked closed, before the subtest ends.
package valuetest

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Harness gives the suite access to one backend. A Harness serves one call
// of [Run]; its methods may be called from several goroutines at once.
type Harness interface {
	// NewClient returns a new client of the value named name, on its own
	// session. Clients created with the same name share the value; the
	// suite uses a distinct name (lowercase letters, digits and dashes)
	// for each property and never reuses one within a Run. NewClient must
	// register the client's teardown with tb.Cleanup, and fail tb
	// (tb.Fatal) if the client can't be created.
	NewClient(tb testing.TB, name string) Client

	// TooLarge returns a data size, in bytes, that the backend's TrySet
	// refuses with recipe.ErrTooLarge before sending anything.
	TooLarge() int
}

// Client is one participant: a recipe.Value on its own session. It may
// also implement [Cutter].
type Client interface {
	recipe.Value
}

// Deleter is implemented by a Harness that can delete a value, through a
// connection of its own, so that the suite checks how a deleted and
// re-created value is watched.
type Deleter interface {
	// Delete deletes the value named name (nothing if it is missing).
	Delete(ctx context.Context, name string) error
}

// Cutter is implemented by a Client whose connection the suite can cut
// while a write is in flight.
type Cutter interface {
	// CutNextWrite arms a fault on the client's next write request (the
	// request of a TrySet, not its reads): with sent, the request reaches
	// the server and the connection is closed before its reply is read
	// (the write applies, its reply is lost); without, the connection is
	// closed instead of sending it. The client reconnects by itself, in
	// the same session. It returns at once.
	CutNextWrite(sent bool)
}

// OpTimeout bounds every step that should complete promptly on a healthy
// backend (a Get, a TrySet, a watcher seeing a change; a TrySet across a
// cut and reconnection), so that a hang fails the test with a message
// instead of blocking it. It is not a performance requirement.
const OpTimeout = 20 * time.Second

// Run checks every property listed in the package documentation against
// the backend behind h, each in a parallel subtest of t named after the
// property.
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

// Properties returns the names of the subtests Run runs, in order.
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
	{"Absent", (*suite).absent},
	{"CreateOnce", (*suite).createOnce},
	{"StaleVersionConflicts", (*suite).staleVersionConflicts},
	{"ConcurrentAddsAllCount", (*suite).concurrentAdds},
	{"WatchLatestInOrder", (*suite).watchLatestInOrder},
	{"TooLarge", (*suite).tooLarge},
	{"LostReplySettled", (*suite).lostReplySettled},
}

// stepCtx bounds one step by OpTimeout.
func stepCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	t.Cleanup(cancel)
	return ctx
}
