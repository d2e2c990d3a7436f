package pglock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/ctxend"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/internal/notify"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Who holds a lock. Every grant's token bump also writes, in the same
// statement, the holder's identity (WithIdentity), the server's now() and
// a "holder lock" (a two-int advisory lock, objsubid 2 in pg_locks: its
// session's backend pid, and 31 random bits) that the bump takes on the
// grant's server session before it commits, into the token row; Release
// clears them in the statement that unlocks. Holder reads the row and
// pg_locks in one statement (holderSQL) and shows the row's holder only
// when the session that holds the lock's key also holds the row's holder
// lock, whose first half is that session's pid.
//
// Why such a result is a state the server had. The statement's snapshot
// of the table is taken at its start, t0; pg_locks (pg_lock_status, read
// once: a MATERIALIZED CTE) is one consistent copy of the lock table, at
// t1 > t0. If at t1 session P holds the key and also the holder lock L
// named by the row visible at t0, then P wrote that row: L is taken by the
// bump that writes it, before its commit, on the session whose pid it
// names, and only a session with that pid can match it again. So P's bump
// committed before t0 and P was alive from then until t1. A pglock session
// takes the key once, before its bump, and never again after it lets go,
// so P held the key throughout [t0, t1]; while it holds it no other grant
// bumps, and P's own later writes (served, Release's clear) leave the
// identity or come with the unlock. So at t0 the key was held by P and the
// row was the state read: Held, with P's token, identity and time. No
// granted key at t1 is Free at t1. Anything else (a grant whose bump has
// not committed, a session of an older pglock, a client outside pglock
// holding the key, a shared lock) is shown as nobody: ErrHolderUnknown. A
// dead holder's row keeps naming it, but its key and holder lock went with
// its session: Free. A holder mid-hand-off (Release's clear and unlock,
// the next grant's bump waiting for the row lock) is seen as the old
// holder until the unlock, then as unknown until the new bump commits.
//
// What it assumes: pg_locks shows the holder lock to every role, so a
// client outside pglock that takes a dead holder's key and holder lock
// on a session that has the dead holder's pid (a pid reused, of all) would
// be shown as that holder, with its old token (no new grant). Writers of
// the token table are trusted (ErrUntrustedTable): they can write anything.

// holderColumns are the token table's holder columns (tables made before
// them lack them: Connect adds them, see prepareColumns).
const holderColumns = "holder pg_catalog.text, held_since pg_catalog.timestamptz, holder_lock pg_catalog.int8"

var _ recipe.HolderObserver = (*Mutex)(nil)

// WithIdentity sets the identity that the Session's grants record in their
// token rows, read back by Holder and ObserveHolder (default
// "<hostname>:<pid>"). It is public: every role that can read the token
// table reads it: name a process, never a secret. It must be 1 to
// MaxIdentityLen bytes of printable UTF-8 (etcdlock's rule), else Connect
// fails with recipe.ErrBadOption. It is sent as a statement parameter,
// never as SQL.
func WithIdentity(id string) Option { return func(o *options) { o.identity = id } }

// WithPollInterval sets how often ObserveHolder reads the holder (default
// DefaultPollInterval, from MinPollInterval to half the TTL, else Connect
// fails with recipe.ErrBadOption). Each ObserveHolder keeps one server
// connection, and each read takes a copy of the server's lock table
// (pg_locks), so a shorter interval costs the server more.
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.poll = d } }

// defaultIdentity is WithIdentity's default: "<hostname>:<pid>"
// ("unknown" for a host name that is no identity), as etcdlock's.
func defaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || checkIdentity(host) != nil || len(host) > MaxIdentityLen-12 {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// checkIdentity returns why id is no identity WithIdentity accepts, or nil:
// 1 to MaxIdentityLen bytes of printable UTF-8 (etcdlock's rule). The same
// check refuses identities read back from the server; its error never
// quotes id, which another client may have written.
func checkIdentity(id string) error {
	switch {
	case id == "":
		return errors.New("empty identity")
	case len(id) > MaxIdentityLen:
		return fmt.Errorf("identity of %d bytes or more, over MaxIdentityLen (%d)", len(id), MaxIdentityLen)
	case !utf8.ValidString(id):
		return errors.New("identity not valid UTF-8")
	}
	for _, r := range id {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("identity with the unprintable character %U", r)
		}
	}
	return nil
}

// holderLock is a grant's holder lock: pg_advisory_lock(hi, lo), which
// pg_locks shows as classid hi, objid lo, objsubid 2, recorded in the row
// as hi*2^32 + lo. hi is the backend pid of the grant's session (Holder
// checks it is the pid of the session holding it), lo is random; both are
// below 2^31, so positive int4 values, and the record a positive int8.
type holderLock struct{ hi, lo int32 }

// newHolderLock returns the holder lock of a grant on the session of
// backend pid: random among 2^31 for that pid.
func newHolderLock(pid uint32) holderLock {
	return holderLock{hi: int32(pid & 0x7fffffff), lo: rand.Int32()}
}

// holder adds the holder's record to the token bump: identity id, the
// server's now(), and the holder lock hl, taken (pg_try_advisory_lock) by
// the same statement, so before its commit. The bump then returns whether
// it got it, last.
func (b *bump) holder(id string, hl holderLock) {
	ip := b.arg(id)
	lp := b.arg(strconv.FormatInt(int64(hl.hi)<<32|int64(hl.lo), 10))
	hi, lo := b.arg(strconv.Itoa(int(hl.hi))), b.arg(strconv.Itoa(int(hl.lo)))
	b.add("holder, held_since, holder_lock", ip+"::pg_catalog.text, pg_catalog.now(), "+lp+"::pg_catalog.int8",
		"holder = EXCLUDED.holder, held_since = EXCLUDED.held_since, holder_lock = EXCLUDED.holder_lock",
		"pg_catalog.pg_try_advisory_lock("+hi+"::pg_catalog.int4, "+lo+"::pg_catalog.int4)")
}

// holderSQL reads the lock's state ($1 its key, $2 and $3 the key's high
// and low halves as pg_locks shows them): how many sessions hold the key,
// the row's token, identity (its first MaxIdentityLen+1 characters, enough
// to refuse a longer one), time (seconds since the epoch), and whether a
// session holding the key also holds the row's holder lock, whose first
// half is that session's pid. The arithmetic
// on holder_lock cannot fail, whatever a row or another session's lock
// holds.
func holderSQL(table string) string {
	return "WITH l AS MATERIALIZED (SELECT pid, classid, objid, objsubid FROM pg_catalog.pg_locks " +
		"WHERE locktype OPERATOR(pg_catalog.=) 'advisory' AND granted AND database OPERATOR(pg_catalog.=) " +
		"(SELECT oid FROM pg_catalog.pg_database WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database())), " +
		"k AS (SELECT pid FROM l WHERE objsubid OPERATOR(pg_catalog.=) 1 AND classid OPERATOR(pg_catalog.=) $2::pg_catalog.oid " +
		"AND objid OPERATOR(pg_catalog.=) $3::pg_catalog.oid) " +
		"SELECT (SELECT pg_catalog.count(*) FROM k), t.n, pg_catalog.left(t.holder, " + strconv.Itoa(MaxIdentityLen+1) + "), " +
		"pg_catalog.extract('epoch', t.held_since)::pg_catalog.text, " +
		"EXISTS (SELECT FROM k JOIN l AS o ON o.pid OPERATOR(pg_catalog.=) k.pid WHERE o.objsubid OPERATOR(pg_catalog.=) 2 " +
		"AND o.classid::pg_catalog.int8 OPERATOR(pg_catalog.=) k.pid::pg_catalog.int8 " +
		"AND o.classid::pg_catalog.int8 OPERATOR(pg_catalog.=) (t.holder_lock OPERATOR(pg_catalog./) 4294967296) " +
		"AND o.objid::pg_catalog.int8 OPERATOR(pg_catalog.=) (t.holder_lock OPERATOR(pg_catalog.%) 4294967296)) " +
		"FROM (SELECT) AS one LEFT JOIN " + table + " AS t ON t.key OPERATOR(pg_catalog.=) $1::pg_catalog.int8"
}

// Holder reads who holds the lock now, in one statement on a connection
// of its own, outside WithMaxConns (holder.go: why the result is a state
// the server had): Free, or Held with the grant's token, WithIdentity and
// the server's time of its token bump. A lock held by a grant it cannot
// confirm yet is read again after 20, 40, 80 and 160 ms. Errors:
// ErrHolderUnknown, ErrBadHolderRecord, ErrTokenTable (a table without the
// holder columns), recipe.ErrSessionClosed, ctx's cause, a connection or
// server error.
func (m *Mutex) Holder(ctx context.Context) (recipe.HolderState, error) {
	s := m.s
	if ctx.Err() != nil {
		return recipe.HolderState{}, context.Cause(ctx)
	}
	if s.holderErr != nil {
		return recipe.HolderState{}, s.holderErr
	}
	actx, cancel := s.life.Bind(ctx)
	defer cancel()
	if !s.life.Enter() {
		return recipe.HolderState{}, recipe.ErrSessionClosed
	}
	defer s.life.Exit()
	r := &holderReader{m: m}
	defer r.close()
	for wait := 20 * time.Millisecond; ; wait *= 2 {
		st, err := r.read(actx)
		if !errors.Is(err, ErrHolderUnknown) || wait > 160*time.Millisecond || loop.Sleep(actx, wait) != nil {
			if err != nil && ctxend.Ended(actx) {
				err = ctxend.Cause(actx)
			}
			return st, err
		}
	}
}

// holderReader reads a lock's holder on a connection it opens when it has
// none, and closes after a failure that may have broken it.
type holderReader struct {
	m *Mutex
	c *lockConn
}

// read is one read of the lock's state (holderSQL).
func (r *holderReader) read(ctx context.Context) (recipe.HolderState, error) {
	m := r.m
	if r.c == nil {
		conn, err := m.s.dial(ctx)
		if err != nil {
			return recipe.HolderState{}, err
		}
		r.c = &lockConn{PgConn: conn, s: m.s}
	}
	rows, err := query(ctx, r.c.PgConn, holderSQL(m.s.table), strconv.FormatInt(m.key, 10),
		strconv.FormatUint(uint64(m.key)>>32, 10), strconv.FormatUint(uint64(m.key)&0xffffffff, 10))
	if err != nil {
		r.close()
		return recipe.HolderState{}, &recipe.OpError{Op: "holder read", Path: m.name, Err: err}
	}
	st, err := parseHolder(rows)
	if err != nil {
		return recipe.HolderState{}, fmt.Errorf("%w (lock %q)", err, m.name)
	}
	return st, nil
}

// close hangs up the reader's connection, if it has one.
func (r *holderReader) close() {
	if r.c != nil {
		r.c.hangUp()
		r.c = nil
	}
}

// parseHolder returns the state holderSQL's rows show. It trusts nothing
// in them: another client may have written the row.
func parseHolder(rows [][][]byte) (recipe.HolderState, error) {
	if len(rows) != 1 || len(rows[0]) != 5 {
		return recipe.HolderState{}, fmt.Errorf("%w: the holder read returned %d rows", ErrBadHolderRecord, len(rows))
	}
	row := rows[0]
	switch {
	case string(row[0]) == "0":
		return recipe.HolderState{}, nil
	case string(row[0]) != "1" || string(row[4]) != "t":
		return recipe.HolderState{}, ErrHolderUnknown
	}
	n, err := strconv.ParseUint(string(row[1]), 10, 64)
	if err != nil || n == 0 {
		return recipe.HolderState{}, fmt.Errorf("%w: a token that is none", ErrBadHolderRecord)
	}
	if row[2] == nil {
		return recipe.HolderState{}, fmt.Errorf("%w: no identity", ErrBadHolderRecord)
	}
	if err := checkIdentity(string(row[2])); err != nil {
		return recipe.HolderState{}, fmt.Errorf("%w: %w", ErrBadHolderRecord, err)
	}
	since, err := parseEpoch(row[3])
	if err != nil {
		return recipe.HolderState{}, fmt.Errorf("%w: %w", ErrBadHolderRecord, err)
	}
	return recipe.HolderState{Held: true, Holder: recipe.Holder{ID: string(row[2]), Token: fence.Token(n), Since: since}}, nil
}

// short returns b for a message, cut to its first 64 bytes.
func short(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}

// parseEpoch parses the seconds since the Unix epoch as PostgreSQL's
// numeric text writes them ("1765100000.123456", "-3.5"), to the
// microsecond, between the years 1 and 9999 (NULL, infinity and anything
// else are refused).
func parseEpoch(b []byte) (time.Time, error) {
	s := string(b)
	neg := strings.HasPrefix(s, "-")
	whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	digits := func(d string) bool { return strings.Trim(d, "0123456789") == "" }
	if b == nil || whole == "" || len(whole) > 12 || !digits(whole) || !digits(frac) {
		return time.Time{}, fmt.Errorf("time %q", short(b))
	}
	frac = (frac + "000000")[:6]
	sec, _ := strconv.ParseInt(whole, 10, 64)
	us, _ := strconv.ParseInt(frac, 10, 64)
	us += sec * 1e6
	if neg {
		us = -us
	}
	t := time.UnixMicro(us).UTC()
	if t.Year() < 1 || t.Year() > 9999 {
		return time.Time{}, fmt.Errorf("time %q", short(b))
	}
	return t, nil
}

// ObserveHolder delivers Holder's state at once and then every change it
// reads, reading every WithPollInterval on a connection of its own
// (outside WithMaxConns, kept until the channel closes): a change is
// delivered within a poll interval and a read; a shorter state may be
// missed. Delivery is coalesced; consecutive states differ; a read with a
// token below one read before is refused. A failed read is logged at
// warning level and retried with backoff (at most 10 s or TTL/2 apart);
// ErrHolderUnknown is read again at the next poll. The channel closes when
// ctx ends or the Session closes, at once (logged at error level) on a
// token table without the holder columns.
func (m *Mutex) ObserveHolder(ctx context.Context) <-chan recipe.HolderState {
	out := notify.NewLatest(recipe.HolderState.Equal)
	if !m.s.life.Go(func() { defer out.Close(); m.observe(ctx, out) }) {
		out.Close()
	}
	return out.C()
}

// maxObserveBackoff bounds the wait between ObserveHolder's failed reads.
const maxObserveBackoff = 10 * time.Second

// observe is ObserveHolder's goroutine.
func (m *Mutex) observe(ctx context.Context, out *notify.Latest[recipe.HolderState]) {
	s := m.s
	if s.holderErr != nil {
		s.log.Error("pglock: ObserveHolder cannot read the holder", "lock", m.name, "err", s.holderErr)
		return
	}
	ctx, cancel := s.life.Bind(ctx)
	defer cancel()
	r := &holderReader{m: m}
	defer r.close()
	// Below half the TTL, so that the server does not end the idle
	// connection between two reads (its idle_session_timeout is the TTL).
	failing := loop.BackOff(s.poll, min(maxObserveBackoff, s.ttl/2))
	var top fence.Token        // the largest token read
	var unknownSince time.Time // the start of a run of ErrHolderUnknown, zero if none
	for {
		st, err := r.read(ctx)
		if err == nil && st.Held && st.Holder.Token < top {
			err = fmt.Errorf("%w: token %v after %v (lock %q)", ErrBadHolderRecord, st.Holder.Token, top, m.name)
		}
		wait := s.poll
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrHolderUnknown):
			if unknownSince.IsZero() {
				unknownSince = time.Now()
			} else if since := time.Since(unknownSince); since > s.ttl && since-s.poll <= s.ttl {
				s.log.Warn("pglock: ObserveHolder: the lock is held by a session that records no holder "+
					"(an older pglock, or a client outside pglock)", "lock", m.name, "for", since)
			}
		case err != nil:
			unknownSince = time.Time{}
			s.log.Warn("pglock: ObserveHolder: reading the holder failed; retrying", "lock", m.name, "err", err)
			wait = failing.NextBackOff()
		default:
			unknownSince = time.Time{}
			failing.Reset()
			top = max(top, st.Holder.Token)
			out.Offer(st) // a state not taken yet is replaced: the reader gets the newest
		}
		if loop.Sleep(ctx, wait) != nil {
			return
		}
	}
}
