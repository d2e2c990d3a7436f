package pglock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The lock statements, with the key and the backend pid announced at
// connect time as parameters. The pid condition is a one-time filter,
// evaluated before the lock function: through a pooler (another backend
// runs the statement) they return no row and lock nothing (ErrPooler).
// Like every statement of this package they name only pg_catalog's
// functions, operators and types (see the package documentation).
const (
	waitSQL = "SELECT pg_catalog.pg_advisory_lock($1::pg_catalog.int8)::pg_catalog.text WHERE pg_catalog.pg_backend_pid() OPERATOR(pg_catalog.=) $2::pg_catalog.int8"
	trySQL  = "SELECT pg_catalog.pg_try_advisory_lock($1::pg_catalog.int8)::pg_catalog.text WHERE pg_catalog.pg_backend_pid() OPERATOR(pg_catalog.=) $2::pg_catalog.int8"
)

// take takes the lock on c: pg_try_advisory_lock, then, for Acquire of a
// held lock, pg_advisory_lock, which waits in the server's queue (reported
// to Metrics.Waiting through w, if enter has not already). If it fails it
// has closed c, unlocking first if a lock statement may have locked.
func (m *Mutex) take(ctx context.Context, c *lockConn, wait bool, w *waitMark) error {
	key, pid := strconv.FormatInt(m.key, 10), strconv.FormatUint(uint64(c.PID()), 10)
	rows, err := c.queryCancelled(ctx, trySQL, key, pid)
	if err == nil && len(rows) == 1 && string(rows[0][0]) != "true" {
		if !wait {
			err = m.fail(ctx, "", recipe.ErrLocked)
			c.hangUp() // refused: nothing to unlock
			return err
		}
		w.start()
		rows, err = c.queryCancelled(ctx, waitSQL, key, pid)
		w.stop()
	}
	switch {
	case err != nil:
		err = m.fail(ctx, "pg_advisory_lock", err)
	case len(rows) == 0:
		err = m.fail(ctx, "", ErrPooler)
	default:
		return nil
	}
	c.unlockAll()
	c.hangUp()
	return err
}

// read bumps the lock's token counter on the holder's connection, in a
// transaction of its own, and returns the grant's record: its token, the
// name the key was first used with, and (with a lock-delay: mark) the
// delay it is to serve. Only the holder bumps the counter, after its
// grant, so counter order is grant order. With the holder columns the
// bump also records the holder (record, holder.go).
func (m *Mutex) read(ctx context.Context, c *lockConn) (record, error) {
	b := &bump{cols: "key, name, n", vals: "$1::pg_catalog.int8, $2::pg_catalog.text, 1",
		sets: "n = t.n OPERATOR(pg_catalog.+) 1", rets: "t.n, t.name",
		args: []string{strconv.FormatInt(m.key, 10), m.name}}
	if m.delay > 0 {
		b.mark(m.delay)
	}
	if m.s.holderErr == nil {
		b.holder(m.s.identity, newHolderLock(c.PID()))
	}
	sent := time.Now()
	rows, err := c.queryCancelled(ctx, b.sql(m.s.table), b.args...)
	rec := record{sent: sent}
	if err == nil {
		err = rec.parse(rows, m.delay)
	}
	if err != nil {
		return record{}, m.fail(ctx, "token bump", err)
	}
	if m.s.holderErr == nil && (len(rows[0]) == 0 || string(rows[0][len(rows[0])-1]) != "t") {
		// Another session holds the grant's holder lock (its pid's, random):
		// Holder reports ErrHolderUnknown while this grant holds.
		m.s.log.Warn("pglock: the grant's holder lock is taken: Holder cannot confirm this grant", "lock", m.name, "token", rec.tok)
	}
	return rec, nil
}

// bump is the token bump statement of a grant, in parts: the columns it
// inserts, their values, the updates of an existing row, what it returns,
// and its parameters.
type bump struct {
	cols, vals, sets, rets string
	args                   []string
}

// arg adds a parameter and returns its placeholder.
func (b *bump) arg(v string) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

// add adds a column, its value, the updates of an existing row and a
// returned value.
func (b *bump) add(col, val, set, ret string) {
	b.cols, b.vals, b.sets, b.rets = b.cols+", "+col, b.vals+", "+val, b.sets+", "+set, b.rets+", "+ret
}

// sql is the statement on table.
func (b *bump) sql(table string) string {
	return "INSERT INTO " + table + " AS t (" + b.cols + ") VALUES (" + b.vals + ") " +
		"ON CONFLICT (key) DO UPDATE SET " + b.sets + " RETURNING " + b.rets
}

// record is the grant's record in its token row, as read returns it.
type record struct {
	tok     fence.Token
	first   string        // the name the key was first used with
	sent    time.Time     // the send time of the last statement answered: the lease's deadline starts there
	pending bool          // a lock-delay is recorded: serve left, then clear it
	left    time.Duration // what remains of it, in [0, delay]
	served  time.Duration // what serveDelay waited: the lease's recipe.LockDelayServed
}

// parse sets the record from the bump's rows: the token, the first name
// and, for a lock-delay d, the delay's start (parseSince).
func (r *record) parse(rows [][][]byte, d time.Duration) error {
	if len(rows) != 1 {
		return errors.New("pglock: token counter returned no row")
	}
	n, err := strconv.ParseUint(string(rows[0][0]), 10, 64)
	if err != nil || n == 0 {
		return fmt.Errorf("pglock: bad token counter value %q", rows[0][0])
	}
	r.tok, r.first = fence.Token(n), string(rows[0][1])
	if d > 0 {
		return r.parseSince(rows[0][2], d)
	}
	return nil
}

// grant hands out the lease of the grant c holds, with record rec,
// unless the caller gave up (actx ended) or the Session closed meanwhile:
// then it gives the grant up (drop) and returns why. The lease keeps
// ctx's values; its monitor is an operation of the Session's, entered
// here.
func (m *Mutex) grant(ctx, actx context.Context, c *lockConn, rec record) (recipe.Lease, error) {
	if actx.Err() != nil || !m.s.life.Enter() {
		err := m.fail(actx, "", recipe.ErrSessionClosed)
		m.drop(c, rec)
		return nil, err
	}
	if rec.first != m.name {
		m.s.log.Warn("pglock: two lock names share one advisory key; they exclude each other",
			"lock", m.name, "other", rec.first, "key", m.key)
	}
	l := newLease(ctx, m, c, rec)
	m.s.log.Debug("pglock: granted", "lock", m.name, "token", rec.tok)
	return l, nil
}

// drop gives up a grant that is not handed out, while its lock is still
// held: it clears the grant's lock-delay mark (unmarkSQL) unless a delay
// was pending or the token row was not bumped (rec is zero), then unlocks
// and closes c, which frees whatever the server session got, a late grant
// included.
func (m *Mutex) drop(c *lockConn, rec record) {
	if m.delay > 0 && rec.tok != 0 && !rec.pending {
		c.cleanUp(unmarkSQL(m.s.table), strconv.FormatInt(m.key, 10), strconv.FormatUint(uint64(rec.tok), 10))
	}
	c.unlockAll()
	c.hangUp()
}

// lockConn is a connection of a Session: a server session of its own,
// which holds the advisory locks taken on it, and, for an acquisition's
// connection, one slot of the Session's WithMaxConns bound. hangUp is the
// one way it is closed, whoever closes it (a failed Acquire, the lease's
// monitor, Release, ConnectConfig's check).
type lockConn struct {
	*pgconn.PgConn
	s    *Session
	slot bool      // holds a slot of s.limit: hangUp gives it back
	hung sync.Once // hangUp's
}

// closeTimeout bounds the goodbye written on a connection being closed,
// and each statement of its clean-up (cleanUp): the socket is closed
// after it either way.
const closeTimeout = time.Second

// query runs one statement with text parameters and returns its rows as
// text.
func query(ctx context.Context, conn *pgconn.PgConn, sql string, args ...string) ([][][]byte, error) {
	params := make([][]byte, len(args))
	for i, a := range args {
		params[i] = []byte(a)
	}
	res := conn.ExecParams(ctx, sql, params, nil, nil, nil).Read()
	return res.Rows, res.Err
}

// queryCancelled is query for a statement that may wait (the lock's):
// when ctx ends, the server is asked to cancel the statement (a cancel
// request, as psql's Ctrl-C), which keeps the connection usable, so that
// a grant can be freed at once (unlockAll) rather than at the end of the
// server session. If the statement has not ended closeTimeout after that,
// the connection is closed.
func (c *lockConn) queryCancelled(ctx context.Context, sql string, args ...string) ([][][]byte, error) {
	qctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		cctx, ccancel := context.WithTimeout(qctx, closeTimeout)
		defer ccancel()
		_ = c.CancelRequest(cctx)
		t := time.AfterFunc(closeTimeout, cancel)
		<-qctx.Done()
		t.Stop()
	})
	defer stop()
	return query(qctx, c.PgConn, sql, args...)
}

// cleanUp runs a statement of a grant being given up, while the lock is
// still held, and waits (at most closeTimeout) for the server to answer.
// A connection that can't run it (closed, or busy with a statement the
// server does not answer) is left to hangUp.
func (c *lockConn) cleanUp(sql string, args ...string) {
	if c.IsClosed() || c.IsBusy() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_, _ = query(ctx, c.PgConn, sql, args...)
}

// unlockAll frees every advisory lock c's server session holds: after a
// failed Acquire, the lock is free when Acquire returns. If it can't run,
// the server frees the locks when hangUp ends the session.
func (c *lockConn) unlockAll() { c.cleanUp("SELECT pg_catalog.pg_advisory_unlock_all()") }

// hangUp closes c once and then gives its slot back. While the Session is
// open it writes the goodbye (Terminate) and waits, at most closeTimeout,
// for the server's end of the socket: PostgreSQL closes it only as the
// backend process exits, having freed the session's locks, left
// pg_stat_activity and given its connection slot back, so the server never
// counts more than WithMaxConns for a Session, not even for that moment.
// After Close, or on a broken connection, it just closes.
func (c *lockConn) hangUp() {
	c.hung.Do(func() {
		if c.s.life.Context().Err() == nil && !c.IsClosed() && !c.IsBusy() {
			nc := c.Conn()
			if nc.SetDeadline(time.Now().Add(closeTimeout)) == nil {
				if _, err := nc.Write([]byte{'X', 0, 0, 0, 4}); err == nil { // Terminate
					_, _ = io.Copy(io.Discard, nc) // until the server's EOF, or the deadline
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_ = c.Close(ctx)
		if c.slot {
			c.s.limit.slots.release()
		}
	})
}
