// Package memlock is an in-memory lock service and its client: a real,
// lease-based implementation of recipe.Lock and recipe.Lease that needs no
// server, for the unit tests of code written against those interfaces (a
// leader loop, a fenced job, a cron singleton). Code that passes its tests
// on memlock meets the same contract on ZooKeeper (package mutex), etcd,
// PostgreSQL and Redis (module backend/*): memlock passes the same
// conformance suite (package testkit/locktest) as they do.
//
// It is not a stub. A Server keeps sessions that expire TTL after the last
// request it received from them, a FIFO queue of entries per lock name, and
// one fencing-token counter raised at every grant. A Session is one client
// process: it sends a keep-alive every TTL/5, and ends its leases (cause
// recipe.ErrSuspended) when no request it sent in the last TTL/2 was
// answered, which is before the Server can expire it: a holder always learns
// of its loss before anyone else is granted the lock, as with the real
// backends. The network between a Session and the Server is simulated, and
// tests break it on purpose:
//
//   - Session.CutOff partitions the Session from the Server (a network
//     partition, a paused process seen from the server): its requests fail
//     without reaching the Server. Its leases end TTL/2 after its last
//     answered request; the Server expires it, and grants its locks to
//     others, TTL after the last request it received. Session.Heal ends the
//     partition; the Session deletes the entries of the leases it gave up,
//     or opens a new server session if the old one expired.
//   - Session.Crash kills the client process: every lease ends (cause
//     recipe.ErrSessionClosed), the Server is not told, and the locks are
//     granted to others when the Server expires the session.
//   - Session.Close is the orderly goodbye: leases end with
//     recipe.ErrSessionClosed and the Server drops the session's entries at
//     once.
//
// Numbers, with TTL T (WithTTL; DefaultTTL is 2 s): a cut-off holder's lease
// context ends between T/2 - T/5 and T/2 after the cut (T/2 after the send
// of its last answered request); the Server grants the lock to the next
// waiter between T - T/5 and T after the cut (T after the last request it
// received). Acquire waits in FIFO order; waiters are woken by the release,
// and a waiter whose Session is cut off retries every 20 ms until it can
// reach the Server again or its context ends.
//
// Usage, in a test:
//
//	srv, err := memlock.NewServer(memlock.WithTTL(500 * time.Millisecond))
//	if err != nil { t.Fatal(err) }
//	defer srv.Close()
//	s := srv.Connect()
//	defer s.Close()
//	m, err := memlock.New(s, "nightly-report") // a recipe.Lock
//	... code under test takes m; s.CutOff() to make it lose the lock ...
//
// Connect's options: WithMetrics reports acquisitions, waiters and lost
// leases to a recipe.Metrics (recipe/prommetrics exports them to Prometheus);
// WithLogger sets where a lost lease is logged (WARN, as on every backend).
//
// Mutex is a recipe.HolderObserver, as every backend's lock is: Holder and
// ObserveHolder show the holder (ID "memlock session <n>"), its token and
// the Server's time of the grant, from the Server's own change signal.
//
// Every Session runs a goroutine until Close (or Crash): close them all
// before a goroutine-leak check (goleak) runs.
package memlock
