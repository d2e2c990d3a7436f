// Package pglock implements recipe.Lock on PostgreSQL (14 or later, on a
// platform with client_connection_check_interval, such as Linux)
// session-level advisory locks, with fencing tokens from a counter table. It
// is a Go module of its own, so that users of the other backends do not pull
// in pgx's pgconn, the driver it uses. docs/backends.md has the details and
// the measurements.
//
// Mutex N is pg_advisory_lock(Key(N)), held by a server session of its own:
// each Acquire opens a dedicated connection (at most WithMaxConns per
// Session; an Acquire beyond it waits in the process, and so do all but one
// of a Session's waiters for one lock), never a pooled one (ErrPooler
// when the statements run on another backend than the connection announced),
// takes the lock if free, else waits in the server's first-come-first-served
// queue, and keeps the connection as the lease. Right after the grant the
// holder bumps its key's counter in the token table (WithTable; Connect
// refuses one that others could write, ErrUntrustedTable), committed
// before Acquire returns: only holders bump, so counter order is grant
// order. An Acquire that ends without a lease frees whatever its connection
// got before it returns, or by closing the connection. Release unlocks, so
// the lock is free when it returns.
//
// The two numbers: every lock connection sets idle_session_timeout = TTL
// (and TCP settings that give up no sooner), so the server frees a silent
// holder's lock TTL after the last message it received. The holder pings
// every TTL/10 and ends its lease context TTL/2 after the send time of its
// last answered ping (recipe.ErrSuspended), so it always gives up first;
// with the default TTL of 10 s, 4 to 5 s after a cut, the server 9 to 10 s
// after it (TestCutHolderNumbers). A failed connection or a session the
// server ended ends the lease at once (recipe.ErrSessionLost; a restart
// ends every lease, and tokens survive it). A killed
// process's lock is freed at once (its kernel closes the connection), which
// is safe: it can no longer act.
//
// Hazards: a holder paused longer than TTL/2 can resume after another grant
// (guard effects with the token); PgBouncer in transaction or statement mode
// breaks session locks (connect directly); every contender must reach the
// same primary (several hosts need target_session_attrs=read-write), and
// advisory locks are not replicated (a failover ends every lease; with
// asynchronous replication tokens could repeat: raise the counters); every
// holder uses a server connection; a cut-off waiter notices
// nothing until its context ends.
//
// Every statement names only pg_catalog's functions, operators and types
// (pg_catalog.pg_advisory_lock, OPERATOR(pg_catalog.=), pg_catalog.int8),
// so that a role with CREATE on a schema of search_path (public before
// PostgreSQL 15) cannot plant a look-alike that the statement resolves to
// and that then runs as the locking role, rewinding the counters
// (CVE-2018-1058), whatever search_path the role has.
//
// Lock-delay (New's WithLockDelay, delay.go): a grant that follows an
// unclean end of the previous holder (anything but Release: its session
// ended, its lease was lost, Session.Close) waits the delay, holding the
// advisory lock, before it is handed out. The grant names itself in its
// token row ("held" = its token) in the token bump; Release clears that in
// the statement that unlocks; the next grant that finds the row still
// naming the previous token records the server's now() as the delay's
// start (kept by a contender that gives up, so the next serves only the
// rest). A lock without the option writes neither column.
//
// Who holds the lock (holder.go): the token bump also records the grant's
// identity (WithIdentity, default "<hostname>:<pid>"), the server's now()
// and an advisory "holder lock" its session takes (its pid and random
// bits), and Release clears them as it unlocks. Mutex.Holder reads the row
// and pg_locks in one statement and names the row's holder only while the
// session that holds the key holds that holder lock too; a dead holder's
// row shows Free, a grant whose bump has not committed ErrHolderUnknown.
// The two numbers: ObserveHolder reads every 500 ms (WithPollInterval), so
// it reports a change at most one poll interval and a read after it.
//
// WithLogger and WithMetrics report grants, waits and lost leases (a lost
// lease once, at WARN with its cause; at DEBUG when Session.Close ended it).
package pglock
