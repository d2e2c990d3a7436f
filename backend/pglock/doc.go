// Package pglock implements recipe.Lock on PostgreSQL session-level advisory
// locks, with fencing tokens from a counter table, so that code written for
// the ZooKeeper recipes runs unchanged against a PostgreSQL database (14 or
// later, on a platform where the server supports
// client_connection_check_interval, such as Linux). It is its own Go module, so that users of the ZooKeeper recipes do
// not pull in a PostgreSQL driver (pgx's pgconn, which this package uses
// directly).
//
// # How it works
//
//   - The lock: Mutex with name N is pg_advisory_lock(Key(N)) in the
//     session's database. Two names with the same 64-bit key share a lock:
//     safe, never unsafe; see Key for the collision rule.
//   - A dedicated connection per Acquire, never a pooled one: a session-level
//     lock belongs to the server session that took it, and must neither
//     return to a pool nor be shared with other statements. Acquire opens it,
//     checks it leads to a server session of its own (ErrPooler otherwise),
//     takes the lock if it is free (pg_try_advisory_lock), else waits in
//     PostgreSQL's lock queue (first come, first served; TryAcquire does not
//     queue). The lease
//     keeps the connection until it ends; Release unlocks (so the lock is
//     free when Release returns) and closes it.
//   - Cancellation without a racing grant: an Acquire that ends without a
//     lease (its context ends, an error, a grant that lands after the
//     caller gave up) closes its connection, and the server frees
//     everything that session held. pgx sends a cancel request for the
//     interrupted wait, and the session parameter
//     client_connection_check_interval makes the server drop a waiter whose
//     connection closed within a ping interval even if that request is lost
//     (a killed process sends none).
//   - The token: right after the grant, on the holder's connection and in a
//     transaction of its own, the holder bumps its key's row in the token
//     table (INSERT ... ON CONFLICT DO UPDATE SET n = n + 1 RETURNING n,
//     committed with synchronous_commit on before Acquire returns). Only the
//     holder bumps it, so counter order is grant order. The table (WithTable,
//     default DefaultTable) is created on first use; its rows must never be
//     deleted, or tokens would start again from 1.
//
// # Loss and its numbers
//
// Every lock connection is opened with session parameters that bound how long
// the server keeps a silent session: idle_session_timeout = TTL, and TCP
// keep-alive (idle TTL/2, then 5 probes TTL/10 apart) and tcp_user_timeout
// settings that give up no sooner. The holder pings every TTL/10 and listens
// on the connection in between. Its lease context ends:
//
//   - with recipe.ErrSuspended when no ping has been answered within TTL/2 of
//     the ping's send time (a partition, a server that hangs);
//   - with recipe.ErrSessionLost as soon as the connection fails or the
//     server ends the session (a restart, pg_terminate_backend);
//   - with recipe.ErrSessionClosed on Session.Close, recipe.ErrReleased on
//     Release.
//
// The server frees the lock of a holder it hears nothing from TTL after the
// last message it received, and a holder's messages are sent no earlier than
// the last ping it saw answered, so the holder gives up first, by TTL/2. With
// the default TTL of 10 s: a holder cut off ends its lease context 4 to 5 s
// after the cut (5 s after its last answered ping), and the server lets the
// next contender in 9 to 10 s after it. The tests show the order
// (TestCutHolderNumbers; the conformance suite). A process that dies on a
// working network is different: its kernel closes the connection and the
// server frees the lock at once, which is safe because the process can no
// longer act (its writes in flight are what tokens are for).
//
// As with every lease, a holder that pauses (GC, swap, a stopped VM) longer
// than TTL/2 can resume after another holder was granted: guard every effect
// with the token (package fence).
//
// # Failover and restart
//
// A server restart or crash ends every session: all locks are freed, every
// holder's lease context ends at once (the connection fails), waiters get a
// connection error. Tokens survive a restart or crash (the bump is committed
// durably). Advisory locks are not replicated: after a failover to a standby
// every holder loses its lease with its connection, and the new primary
// starts with no locks. With asynchronous replication the last bumps may be
// missing on the new primary, so tokens could repeat: use synchronous
// replication, or raise every counter past the highest token a resource may
// have seen before clients return (UPDATE <table> SET n = n + 1000000).
//
// # Hazards
//
//   - Poolers: PgBouncer in transaction or statement mode breaks
//     session-level locks; connect to the server directly. A pooler that
//     shows its own backend key (PgBouncer does) is refused with ErrPooler;
//     one that rejects the startup parameters fails the connection.
//   - One primary: every contender must reach the same writable server (a
//     URL with several hosts needs target_session_attrs=read-write; a
//     standby's grant never becomes a lease, since its token bump fails).
//   - Connections: every holder and every waiter uses a server connection
//     (and process) until it ends; size max_connections for them.
//   - A cut-off waiter notices nothing until its context ends (it has no
//     spare connection to ping on); the server frees a grant that lands on it
//     TTL later.
package pglock
