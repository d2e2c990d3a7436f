// Package zookeeper is the ZooKeeper backend of zkrecipes: the Session, and
// Queue, the engine that the ZooKeeper recipes (packages mutex, election and
// latch) are built on.
//
// # Session
//
// A Session (Connect) owns one go-zookeeper connection and the ZooKeeper
// sessions opened on it one after another: when the server expires a
// session, a new one is opened and everything granted under the old one is
// lost. Every recipe runs on a Session, and one per process is usually
// enough. Close ends the ZooKeeper session, and with it all its ephemeral
// znodes.
//
// # Connection states
//
// A Session reports Curator's connection states (State, Listen):
// CONNECTED; SUSPENDED when the connection is down or no server has replied
// for too long; RECONNECTED, in the same ZooKeeper session or a new one;
// LOST when the session expired, was presumed expired (no reply within the
// session timeout) or the Session was closed. Listen never blocks the
// client: a slow reader delays only itself. Under the default suspend
// policy (the zero SuspendPolicy) every lease ends at SUSPENDED; TolerateSuspension
// keeps leases through a short outage, up to a deadline counted from the
// last server reply (WithSuspendPolicy).
//
// # Grants
//
// Every ZooKeeper recipe implements recipe.Lock, and every grant is a
// recipe.Lease: see package recipe for the contract, which every backend of
// the module shares. Its dynamic type also has a method Path() string,
// which names its znode relative to the chroot (tools and tests assert
// interface{ Path() string } to find the grant's znode).
//
// While a Lease's Context is not done, its znode
// exists, is owned by the current session, and the connection has not been
// suspended past the suspend policy.
//
// # Paths
//
// A recipe's directory (and a fencezk register, and the chroot) is an
// absolute path that ZooKeeper accepts, not "/", outside /zookeeper, and
// with no segment named like a queue node: "_c_", 32 lowercase hex digits,
// "-", a kind and a sequence in ZooKeeper's %010d form
// ("_c_<guid>-lock-0000000000", "_c_<guid>-read-@<seq>@<seq>", of any kind).
// A directory so named would be listed by the recipe of its parent as a
// contender: the lock "P/_c_<guid>-lock-0000000000", while held, would make
// the lock P look held, and a "-read-" one would make every other recipe on
// P fail with recipe.ErrMixedRecipes. Such a path is refused before
// anything is sent, with a *PathError matching ErrReservedName and
// recipe.ErrInvalidPath. So is a segment named "_lock-delay",
// the record a lock with a lock-delay keeps in its directory: a lock
// "P/_lock-delay" would be taken for P's marker. Every other name,
// "_c_"-prefixed or not, is free.
//
// # Writing a recipe
//
// A ZooKeeper recipe is a Queue: a directory holding one ephemeral
// sequential znode per contender, node kinds, and a Rule that decides from
// the ordered listing whether a node holds and, if not, which nodes it
// waits for. NewQueue also takes the QueueOptions that the Rule satisfies
// beyond the contract stated on Rule (GrantsLowest, AllowsAnchors). The
// engine does the creating, waiting, watching, retrying and cleaning up:
// Acquire and TryAcquire grant Leases; Join returns a Ticket whose znode
// keeps its place across suspensions; AcquireAnchored takes the place of a
// granted node; Participants, Head and ObserveHead read the queue; Drain
// waits for work left in flight. See ExampleNewQueue.
//
// recipe.Metrics (WithMetrics) and log/slog (WithLogger) report what Sessions and
// recipes do; package recipe/prommetrics exports the metrics to Prometheus.
//
// The recipes follow the ZooKeeper recipes page
// (https://zookeeper.apache.org/doc/current/recipes.html) and Apache
// Curator. How the engine works, and why it is safe, is told for
// maintainers in docs/design.md of the repository.
//
// Usage:
//
//	s, err := zookeeper.Connect(ctx, []string{"127.0.0.1:2181/myapp"})
//	if err != nil { ... }
//	defer s.Close()
//	m, err := mutex.New(s, "/locks/nightly-report")
//	lease, err := m.Acquire(ctx)
//	if err != nil { ... }
//	defer lease.Release(context.Background())
//	doWork(lease.Context(), lease.Token())
package zookeeper
