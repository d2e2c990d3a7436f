package pglock

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

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
// 64-bit integer, which pg_advisory_lock(bigint) is called with (pg_locks
// shows its high half in classid, its low half in objid, objsubid 1). Two
// names with one key share one lock and token counter: safe, only slower
// (docs/backends/postgresql.md, the collision rule).
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
// grant's token is committed. It returns context.Cause(ctx) if ctx ends
// first, recipe.ErrSessionClosed if the session is closed, ErrPooler, or a
// connection or server error (in a *recipe.OpError for statements).
// Whatever the error, the attempt's connection is closed, which withdraws
// it from the queue and frees a grant that landed as the caller gave up:
// before Acquire returns (cancel, then pg_advisory_unlock_all, at most a
// second each), or when the server ends the session if it does not answer.
func (m *Mutex) Acquire(ctx context.Context) (recipe.Lease, error) { return m.acquire(ctx, true) }

// TryAcquire takes the lock if it is free right now (pg_try_advisory_lock),
// else returns an error matching recipe.ErrLocked; other errors as Acquire.
func (m *Mutex) TryAcquire(ctx context.Context) (recipe.Lease, error) {
	return m.acquire(ctx, false)
}

// acquire is Acquire (wait) and TryAcquire, with their metrics.
func (m *Mutex) acquire(ctx context.Context, wait bool) (recipe.Lease, error) {
	a := grant.Begin(m.s.metrics, metricKind, m.name)
	l, err := m.contend(ctx, wait)
	a.Done(l, err)
	return l, err
}

// contend is one acquisition, within the Session's bounds (enter,
// limit.go), in the steps every backend has: take the advisory lock on a
// connection of its own, read the grant's token row, serve a lock-delay
// that row records (serveDelay, delay.go), then grant: hand the lease out,
// or give up everything the connection got. Each step that fails gives up
// what it took; its error is Acquire's.
func (m *Mutex) contend(ctx context.Context, wait bool) (recipe.Lease, error) {
	s := m.s
	actx, cancel := s.life.Bind(ctx)
	defer cancel()
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if !s.life.Enter() {
		return nil, recipe.ErrSessionClosed
	}
	defer s.life.Exit()
	w := &waitMark{m: m}
	defer w.stop()
	endTurn, err := m.enter(actx, wait, w)
	if err != nil {
		return nil, m.fail(actx, "", err)
	}
	defer endTurn() // at the grant (or failure): the next local waiter may queue at the server
	c, err := s.dialLock(actx)
	if err != nil {
		return nil, m.fail(actx, "", err)
	}
	if err := m.take(actx, c, wait, w); err != nil {
		return nil, err
	}
	rec, err := m.read(actx, c)
	if err == nil && rec.pending { // the previous holder ended uncleanly
		err = m.serveDelay(actx, c, wait, &rec)
	}
	if err != nil {
		m.drop(c, rec)
		return nil, err
	}
	return m.grant(ctx, actx, c, rec)
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
