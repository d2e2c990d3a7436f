// Package recipe is the foundation of zkrecipes: the ZooKeeper Session with
// Curator's connection states, the backend-neutral Lock and Lease
// interfaces, and the one ephemeral-sequential queue engine (Queue) that
// every recipe (mutex, read-write lock, semaphore, leader latch, election)
// drives.
//
// The problem it solves: a lock built on ZooKeeper is a lease bound to a
// session, and most hand-rolled (and several library) recipes get the edges
// wrong: a create whose reply was lost leaves a node that deadlocks the
// queue; a cancelled waiter's cleanup uses the cancelled context and never
// runs; a holder keeps working after its session expired because nobody told
// it. This package handles those edges once, for every recipe:
//
//   - Session turns go-zookeeper's events into CONNECTED, SUSPENDED,
//     RECONNECTED and LOST without missing any, treats a new session ID as
//     LOST for everything granted before, counts server silence from the send
//     time of the newest request a server answered (not from when the client
//     noticed), and retries cleanup deletes on reconnection.
//   - Queue creates protected ephemeral sequential znodes, watches only the
//     nodes its Rule names (a mutex: the predecessor; a read lock: the
//     nearest writer ahead; a semaphore of N: the N nodes ahead),
//     re-derives everything from a fresh listing on every wakeup, and never
//     leaves a node behind on error. Acquire is one contender; Join returns
//     a Ticket whose node keeps its place across suspensions (the leader
//     latch); AcquireAnchored takes an existing grant's place (the
//     read-write lock's downgrade); ObserveHead follows the first node (an
//     election's observers); Drain waits for in-flight creates and deferred
//     deletes (a recipe's final Close).
//   - Notifications to user code (Session.Listen) never block the client's
//     event delivery: a slow reader delays only itself.
//   - Every grant is a Lease with a fencing token (the node's czxid) and a
//     context cancelled the moment ownership is released or in doubt.
//   - Metrics (installed with WithMetrics) receives acquisitions, waiters,
//     lost leases and state changes, for any metrics library; package
//     recipe/zkprom adapts it to Prometheus.
//   - Logs go through log/slog: by default the records of level WARN and
//     above, to slog.Default()'s handler (WithLogger sets another logger),
//     so a healthy Session logs nothing and one that keeps failing is seen.
//
// The guarantee: while a Lease's Context is not done, its node exists, is
// owned by the current session, and the connection has not been suspended
// past the SuspendPolicy. That is all a lock service can promise; the
// resource must still reject stale tokens (package fence).
//
// Recipes follow the ZooKeeper recipes page
// (https://zookeeper.apache.org/doc/current/recipes.html) and Apache
// Curator's LockInternals / InterProcessMutex.
//
// Usage:
//
//	s, err := recipe.Connect(ctx, []string{"127.0.0.1:2181/myapp"})
//	if err != nil { ... }
//	defer s.Close()
//	m, err := mutex.New(s, "/locks/nightly-report")
//	lease, err := m.Acquire(ctx)
//	if err != nil { ... }
//	defer lease.Release(context.Background())
//	doWork(lease.Context(), lease.Token())
package recipe
