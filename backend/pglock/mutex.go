package pglock

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/ctxend"
	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/lockname"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// MaxNameLen is the longest lock name New accepts, in bytes.
const MaxNameLen = 1024

// keyDomain separates our hashes from any other use of SHA-256 on names.
const keyDomain = "zkrecipes/pglock\x00"

// Key returns the advisory lock key of the lock named name: the first 8
// bytes of SHA-256("zkrecipes/pglock\x00" + name), big-endian, as a signed
// 64-bit integer. It is what pg_advisory_lock(bigint) is called with and what
// pg_locks shows (high half in classid, low half in objid, objsubid 1).
//
// Collision rule: two names with the same key share one lock and one token
// counter. That is safe (they exclude each other, tokens still grow) but one
// waits for the other; the token table records the first name of each key
// and Acquire logs a warning when another name uses it. By the birthday bound
// a collision needs about 2^32 names in one database. A key equal to one
// another application passes to pg_advisory_lock(bigint) has the same
// effect; the two-int form pg_advisory_lock(int, int) never collides with it.
func Key(name string) int64 {
	sum := sha256.Sum256([]byte(keyDomain + name))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// Mutex is a lock named by a string, in the database of its session:
// PostgreSQL's session-level advisory lock on Key(name), with a fencing token
// from the session's token table. It implements recipe.Lock; each Acquire is
// an independent contender on a connection of its own. It is safe for
// concurrent use.
type Mutex struct {
	s     *Session
	name  string
	key   int64
	rep   *grant.Reporter // where its leases report their loss
	delay time.Duration   // WithLockDelay's (delay.go)
}

var _ recipe.Lock = (*Mutex)(nil)

// New returns the lock named name on s. A name is what every backend takes:
// not empty, valid UTF-8 (the tokens table stores it as text), no NUL byte
// (which text cannot hold), at most MaxNameLen bytes; nothing else is
// refused, and every byte counts ("/a" and "a" are two locks). Otherwise the
// error is a *NameError (matching recipe.ErrInvalidPath). A bad option
// gives an error matching recipe.ErrBadOption, WithLockDelay on a token
// table without its columns one matching ErrTokenTable. Nothing is sent to
// the server.
func New(s *Session, name string, opts ...MutexOption) (*Mutex, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: pglock.New: nil *Session", recipe.ErrBadOption)
	}
	if err := CheckName(name); err != nil {
		return nil, err
	}
	m := newMutex(s, name, Key(name))
	for _, o := range opts {
		if o != nil { // a nil option is skipped, as Connect's are
			o(m)
		}
	}
	if err := grant.CheckDelay("pglock.WithLockDelay", m.delay); err != nil {
		return nil, err
	}
	if m.delay > 0 && s.delayErr != nil {
		return nil, s.delayErr
	}
	return m, nil
}

func newMutex(s *Session, name string, key int64) *Mutex {
	rep := &grant.Reporter{Log: s.log, Metrics: s.metrics, Backend: "pglock", Kind: metricKind, Dir: name}
	return &Mutex{s: s, name: name, key: key, rep: rep}
}

// metricKind is the kind every event of this package reports to
// recipe.Metrics: a mutex's.
const metricKind = "lock"

// CheckName returns the error New returns for name (a *NameError matching
// recipe.ErrInvalidPath), or nil if New accepts it: a program can refuse a
// bad name before it connects.
func CheckName(name string) error { return nameRules.Check(name) }

// nameRules are the lock-name rules of every backend (internal/lockname)
// with this package's MaxNameLen.
var nameRules = lockname.Rules{Backend: "pglock", MaxLen: MaxNameLen}

// NameError is the error of New and CheckName for a lock name this package
// refuses: Name is the name as given, Reason the rule it breaks. It matches
// recipe.ErrInvalidPath; its message shows a name over 200 bytes as its
// first 64 bytes and its length. etcdlock and redislock return the same
// type.
type NameError = lockname.Error

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// Acquire takes the lock if it is free, else waits in PostgreSQL's lock
// queue for it (first come, first served), and returns its lease once the
// grant's token is committed. It
// returns context.Cause(ctx) if ctx ends first, recipe.ErrSessionClosed if
// the session is closed, ErrPooler, or a connection or server error (in a
// *recipe.OpError for statements). Whatever the error, the attempt's
// connection is closed, which withdraws it from the queue and frees a grant
// that landed as the caller gave up. That grant is freed before Acquire
// returns (the lock statement is cancelled, then pg_advisory_unlock_all
// runs, at most a second each), unless the server does not answer: then it
// is freed when the server ends the session.
func (m *Mutex) Acquire(ctx context.Context) (recipe.Lease, error) { return m.acquire(ctx, true) }

// TryAcquire takes the lock if it is free right now (pg_try_advisory_lock),
// else returns an error matching recipe.ErrLocked; other errors as Acquire.
func (m *Mutex) TryAcquire(ctx context.Context) (recipe.Lease, error) {
	return m.acquire(ctx, false)
}

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

// acquire is Acquire (wait) and TryAcquire, with their metrics.
func (m *Mutex) acquire(ctx context.Context, wait bool) (recipe.Lease, error) {
	a := grant.Begin(m.s.metrics, metricKind, m.name)
	l, err := m.take(ctx, wait)
	a.Done(err)
	return l, err
}

// take is one acquisition: a connection of its own that takes the advisory
// lock (waiting for it if wait), then the token bump.
func (m *Mutex) take(ctx context.Context, wait bool) (_ recipe.Lease, err error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	s := m.s
	if !s.life.Enter() {
		return nil, recipe.ErrSessionClosed
	}
	defer s.life.Exit()
	actx, cancel := s.life.Bind(ctx)
	defer cancel()

	w := &waitMark{m: m}
	defer w.stop()
	endTurn, err := m.enter(actx, wait, w)
	if err != nil {
		return nil, m.fail(actx, "", err)
	}
	if endTurn != nil {
		defer endTurn() // at the grant (or failure): the next local waiter may queue at the server
	}
	granted := false
	defer func() {
		if !granted {
			s.limit.slots.release() // after hangUp (deferred below, so run first)
		}
	}()
	conn, err := s.dialLock(actx)
	if err != nil {
		return nil, m.fail(actx, "", err)
	}
	locking := false
	defer func() {
		if !granted {
			if locking {
				unlockAll(conn)
			}
			s.closeConn(conn) // frees whatever the session got, a late grant included
		}
	}()
	if locking, err = m.lock(actx, conn, wait, w); err != nil {
		return nil, err
	}

	sent := time.Now()
	b, err := m.bump(actx, conn)
	if err != nil {
		return nil, m.fail(actx, "token bump", err)
	}
	if m.delay > 0 && !b.pending {
		defer func() {
			if !granted {
				m.unmark(conn, b.tok) // before the unlock (deferred above)
			}
		}()
	}
	if b.pending { // the previous holder ended uncleanly (delay.go)
		if sent, err = m.serveDelay(actx, conn, wait, b); err != nil {
			return nil, m.fail(actx, "", err)
		}
	}
	if actx.Err() != nil {
		return nil, context.Cause(actx) // gave up after the grant: hangUp frees it
	}
	if b.first != m.name {
		s.log.Warn("pglock: two lock names share one advisory key; they exclude each other",
			"lock", m.name, "other", b.first, "key", m.key)
	}
	l := newLease(ctx, m, conn, b.tok)
	l.SetDelayServed(b.left)
	if !s.life.Go(func() { l.monitor(sent) }) {
		return nil, recipe.ErrSessionClosed
	}
	granted = true
	s.log.Debug("pglock: granted", "lock", m.name, "token", b.tok)
	return l, nil
}

// dialLock opens an acquisition's connection; a server out of connection
// slots is ErrConnLimit.
func (s *Session) dialLock(ctx context.Context) (*pgconn.PgConn, error) {
	conn, err := s.dial(ctx)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "53300" { // too_many_connections
		err = fmt.Errorf("%w: %w", ErrConnLimit, err)
	}
	return conn, err
}

// lock takes the lock on conn: pg_try_advisory_lock, then, for Acquire of a
// held lock, pg_advisory_lock, which waits in the server's queue (reported
// to Metrics.Waiting through w, if enter has not already). sent reports whether a statement that may have
// locked was sent: a failed Acquire unlocks then.
func (m *Mutex) lock(ctx context.Context, conn *pgconn.PgConn, wait bool, w *waitMark) (sent bool, err error) {
	key, pid := strconv.FormatInt(m.key, 10), strconv.FormatUint(uint64(conn.PID()), 10)
	rows, err := queryCancelled(ctx, conn, trySQL, key, pid)
	switch {
	case err != nil:
		return true, m.fail(ctx, "pg_advisory_lock", err)
	case len(rows) == 0:
		return true, m.fail(ctx, "", ErrPooler)
	case string(rows[0][0]) == "true":
		return true, nil
	case !wait:
		return false, m.fail(ctx, "", recipe.ErrLocked) // refused: nothing to unlock
	}
	w.start()
	defer w.stop()
	rows, err = queryCancelled(ctx, conn, waitSQL, key, pid)
	switch {
	case err != nil:
		return true, m.fail(ctx, "pg_advisory_lock", err)
	case len(rows) == 0:
		return true, m.fail(ctx, "", ErrPooler)
	}
	return true, nil
}

// fail is Acquire's error for err of statement op ("" for none): ctx's
// cause if the attempt was abandoned, else err, in a *recipe.OpError for a
// statement.
func (m *Mutex) fail(ctx context.Context, op string, err error) error {
	if ctxend.Ended(ctx) {
		return ctxend.Cause(ctx)
	}
	if op == "" {
		return err
	}
	return &recipe.OpError{Op: op, Path: m.name, Err: err}
}

// queryCancelled is query for a statement that may wait (the lock's): when
// ctx ends, the server is asked to cancel the statement (a cancel request,
// as psql's Ctrl-C), which keeps the connection usable, so that the caller
// can free a grant at once (unlockAll) rather than leave it to the end of
// the server session. If the statement has not ended closeTimeout after
// that, the connection is closed.
func queryCancelled(ctx context.Context, conn *pgconn.PgConn, sql string, args ...string) ([][][]byte, error) {
	qctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		cctx, ccancel := context.WithTimeout(qctx, closeTimeout)
		defer ccancel()
		_ = conn.CancelRequest(cctx)
		t := time.AfterFunc(closeTimeout, cancel)
		<-qctx.Done()
		t.Stop()
	})
	defer stop()
	return query(qctx, conn, sql, args...)
}

// unlockAll frees every advisory lock conn's server session holds, waiting
// (at most closeTimeout) for the server to say so: after a failed Acquire,
// the lock is free when Acquire returns. A connection that can't run it
// (closed, or the server does not answer) is left to hangUp: the server
// frees the locks when the session ends.
func unlockAll(conn *pgconn.PgConn) {
	if conn.IsClosed() || conn.IsBusy() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_, _ = query(ctx, conn, "SELECT pg_catalog.pg_advisory_unlock_all()")
}

// bump increments the lock's token counter on the holder's connection, in a
// transaction of its own, and returns the new value and the name the key
// was first used with. Only the holder bumps the counter, after its grant,
// so counter order is grant order. With a lock-delay it is markSQL, which
// also says whether a delay is to be served; without, the statement is the
// same as before the lock-delay existed.
func (m *Mutex) bump(ctx context.Context, conn *pgconn.PgConn) (bumped, error) {
	sql := "INSERT INTO " + m.s.table + " AS t (key, name, n) VALUES ($1::pg_catalog.int8, $2::pg_catalog.text, 1) " +
		"ON CONFLICT (key) DO UPDATE SET n = t.n OPERATOR(pg_catalog.+) 1 RETURNING t.n, t.name"
	args := []string{strconv.FormatInt(m.key, 10), m.name}
	if m.delay > 0 {
		sql, args = markSQL(m.s.table), append(args, strconv.FormatFloat(m.delay.Seconds(), 'f', -1, 64))
	}
	rows, err := queryCancelled(ctx, conn, sql, args...)
	if err != nil {
		return bumped{}, err
	}
	if len(rows) != 1 {
		return bumped{}, errors.New("pglock: token counter returned no row")
	}
	n, err := strconv.ParseUint(string(rows[0][0]), 10, 64)
	if err != nil || n == 0 {
		return bumped{}, fmt.Errorf("pglock: bad token counter value %q", rows[0][0])
	}
	b := bumped{tok: fence.Token(n), first: string(rows[0][1])}
	if m.delay > 0 {
		err = b.parseSince(rows[0][2], m.delay)
	}
	return b, err
}
