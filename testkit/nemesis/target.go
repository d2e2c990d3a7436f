package nemesis

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"go.uber.org/goleak"
)

// Target is one backend under the nemesis: its servers, how its clients
// connect, the faults it can make and what it must leave clean. ZooKeeper
// is one Target (ZooKeeperTarget); etcd, PostgreSQL and Redis each provide
// one from their own module. The engine (RunTarget) calls Prepare once per
// run, then Connect for each client, then Faults' injections, Heal,
// Diagnose (only when stuck) and, after every client closed, Leftovers. A
// Target serves one run at a time and may serve many runs in turn.
type Target interface {
	// Name names the backend: "zk", "etcd", "pg", "redis", "k8s" (reports,
	// directories, the command's -backend).
	Name() string
	// Prepare readies a run under base (a znode path, key prefix or lock
	// name prefix the run owns): clears what a previous run left there and
	// records baselines (e.g. ZooKeeper's watch count). The recipes lock
	// the name base+"/lock" (a directory for ZooKeeper's recipes).
	Prepare(ctx context.Context, base string) error
	// Connect makes client i, every byte of whose traffic to the servers
	// goes through p (its dialer, or an address from p.Listen), so that
	// the engine can cut, blackhole and slow it. The engine closes p.
	Connect(ctx context.Context, i int, p *serverkit.FaultProxy) (Client, error)
	// SessionTimeout is T: how long after a client stops being heard the
	// server may let another in (ZooKeeper: the negotiated session
	// timeout; etcd, Redis, PostgreSQL: the lease, TTL or keepalive bound
	// of docs/backends.md). The checks' bound is T + 1 s. Valid once a
	// client connected.
	SessionTimeout() time.Duration
	// Faults lists this backend's own fault kinds (server process faults,
	// revocations); the engine adds the generic client faults itself
	// (GenericFaults).
	Faults() []FaultKind
	// Registers lists fenced registers kept in the backend's own store
	// (ZooKeeper: the fencezk znode register); nil if none. The guard
	// register and Config.SQL's register are the engine's.
	Registers() []Register
	// Heal undoes every server fault still in effect and returns once
	// every server serves.
	Heal(ctx context.Context) error
	// Leftovers lists what the run left behind after every client closed
	// (nodes, keys, locks, server connections, watches): each a
	// violation. The engine calls it again for up to 10 s until it is
	// empty; an error is retried the same way.
	Leftovers(ctx context.Context) ([]string, error)
	// Diagnose says what the servers hold when no client was granted
	// after the heal (nil if nothing to say).
	Diagnose(ctx context.Context) []string
	// Close releases what the target itself opened (admin connections);
	// not the servers.
	Close() error
}

// Client is one connected client of a Target.
type Client interface {
	// Lock returns the backend's exclusive lock on name (a name the run
	// owns, under base).
	Lock(name string) (recipe.Lock, error)
	// Close closes the client: its leases end, its connections close.
	Close() error
}

// LeakFilter is implemented by a Target whose faults leave goroutines
// that are not the run's leaks (the reaper of a server process it
// restarted): the engine's goroutine check ignores what IgnoreLeaks
// returns. The check's baseline is taken after Prepare, so that a
// Target's own connections opened there are not leaks either.
type LeakFilter interface {
	IgnoreLeaks() []goleak.Option
}

// RunEnder is implemented by a Target that holds something for one run
// only: the engine calls EndRun once per run, after the last Leftovers and
// before the goroutine check, so that what it closes there (ZooKeeper: its
// admin connection, whose reconnections after server faults start
// goroutines) is not counted as a leak. An error is reported as a
// violation.
type RunEnder interface {
	EndRun(ctx context.Context) error
}

// Scope says what a fault occupies: the engine injects at most one fault
// at a time per scope (per client for ScopeClient), so that a fault is
// never injected onto a target another fault still holds.
type Scope int

// Scopes of faults.
const (
	ScopeServer Scope = iota // the servers: one server fault at a time
	ScopeClient              // one client (Fault.Client): one fault per client at a time
	ScopeStore               // the run's data (a directory, keys): one at a time
)

// FaultKind is a kind of fault a Target (or the engine) can inject.
type FaultKind struct {
	// Name names the kind in reports and in Config.Faults, e.g.
	// "kill-member", "terminate-backend", "client-kill".
	Name  string
	Scope Scope
	// Inject injects one fault of this kind and, unless it is
	// instantaneous, undoes it after d (or when ctx ends: undo anyway,
	// at once). f arrives with Kind, Client (-1 unless ScopeClient) and
	// Start set; Inject sets Target, Err, and for a fault that can take a
	// lease from its holder behind its back (a revocation: an expiry, a
	// deleted key or node, a terminated backend) Revokes, Certain and
	// Below (every grant with a token below Below was removed; 0:
	// unknown). rng is this fault's own, for its choices (which server).
	// The engine sets End when Inject returns. Inject is called on a
	// goroutine of its own; it must not block past d plus the time to
	// undo.
	Inject func(ctx context.Context, f *Fault, d time.Duration, rng *rand.Rand)
	// Busy, if set, reports that no fault of this kind can be injected
	// now (e.g. a server whose restart failed is still down, until Heal):
	// the engine skips it, as it skips a fault on a busy scope.
	Busy func() bool
}

// Register is a fenced register kept in the backend's own store.
type Register struct {
	// Name names it in the history and the reports (RegZnode, "sql", ...).
	Name string
	// Write writes val with token on behalf of client i; it calls live()
	// exactly once, at the point where the write is certain to apply
	// (inside its transaction, or right after an accepted
	// compare-and-set), and returns the state it overwrote and its order
	// of application (Seq, counted from 1; 0 if unknown). Errors wrap
	// fence.ErrStale (refused) or fence.ErrUncertain (may have applied);
	// any other error means not applied.
	Write func(ctx context.Context, client int, token fence.Token, val string, live func()) (prev State, seq int64, err error)
}

// RunTarget runs recipe r on target t under the nemesis for cfg.Duration:
// the workload, the generic client faults plus t.Faults(), the heal, the
// recovery, the checks (Check), t's leftovers and the goroutine check. It
// returns the history and the report. The returned error is for a run
// that could not be carried out (no connection to the servers, or ctx
// ended before the checks were done: the Result is then partial); broken
// invariants are in Report.Violations. t stays open (the caller closes
// it).
func RunTarget(ctx context.Context, t Target, r Recipe, cfg Config) (*Result, error) {
	return runTarget(ctx, t, r, cfg)
}
