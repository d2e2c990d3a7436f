package pglock

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// testPoll is the poll interval of the observers of these tests.
const testPoll = 20 * time.Millisecond

// named returns a Mutex of lock on a session of its own with identity id.
func (h *harness) named(t *testing.T, lock, id string, opts ...Option) *Mutex {
	t.Helper()
	s := h.session(t, serverkit.NewFaultProxy(), append([]Option{WithIdentity(id), WithPollInterval(testPoll)}, opts...)...)
	m, err := New(s, lock)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mustHolder returns m.Holder's state or fails the test.
func mustHolder(t *testing.T, m *Mutex) recipe.HolderState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	st, err := m.Holder(ctx)
	if err != nil {
		t.Fatalf("%s: Holder: %v", m.name, err)
	}
	return st
}

// wantHeld fails the test unless st is held by id with the lease's token.
func wantHeld(t *testing.T, st recipe.HolderState, id string, l recipe.Lease) {
	t.Helper()
	if !st.Held || st.Holder.ID != id || st.Holder.Token != l.Token() {
		t.Fatalf("state %v, want held by %q with token %v", st, id, l.Token())
	}
}

// admin runs sql with args on the harness's administrator connection.
func (h *harness) admin(t *testing.T, sql string, args ...string) [][][]byte {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	rows, err := query(context.Background(), h.adm, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return rows
}

// TestHolder: Holder on a free lock, a held one (identity, token, time),
// after Release (the record cleared), after the holder's session ended
// without Release (the row still naming it), and the default identity.
func TestHolder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const lock = "holder"
	a := h.named(t, lock, "worker-a")
	if st := mustHolder(t, a); st.Held {
		t.Fatalf("a lock never taken: %v", st)
	}
	before := time.Now()
	l := mustAcquire(t, a)
	after := time.Now()
	st := mustHolder(t, h.named(t, lock, "reader"))
	wantHeld(t, st, "worker-a", l)
	// The server's clock is this machine's: Since is the bump's now().
	if since := st.Holder.Since; since.Before(before.Add(-time.Second)) || since.After(after.Add(time.Second)) {
		t.Errorf("Since %v, want between %v and %v", since, before, after)
	}
	mustRelease(t, l)
	if st := mustHolder(t, a); st.Held {
		t.Fatalf("after Release: %v", st)
	}
	key := strconv.FormatInt(Key(lock), 10)
	if rows := h.admin(t, "SELECT holder IS NULL AND held_since IS NULL AND holder_lock IS NULL FROM "+DefaultTable+" WHERE key = $1", key); string(rows[0][0]) != "t" {
		t.Errorf("Release left the holder's record in the row")
	}

	mustAcquire(t, a)
	h.terminate(t, a)
	h.waitLocks(t, lock, 0) // the backend has exited (its client may hear of it first)
	if st := mustHolder(t, a); st.Held {
		t.Errorf("after the holder's session was terminated: %v", st)
	}
	if rows := h.admin(t, "SELECT holder FROM "+DefaultTable+" WHERE key = $1", key); string(rows[0][0]) != "worker-a" {
		t.Errorf("the row names %q, want the dead holder still", rows[0][0])
	}

	m, err := New(h.session(t, serverkit.NewFaultProxy()), lock)
	if err != nil {
		t.Fatal(err)
	}
	l = mustAcquire(t, m)
	if st := mustHolder(t, a); st.Holder.ID != defaultIdentity() || !strings.Contains(st.Holder.ID, ":") {
		t.Errorf("default identity %q, want %q (<hostname>:<pid>)", st.Holder.ID, defaultIdentity())
	}
	mustRelease(t, l)
}

// TestHolderUnconfirmed: a grant whose token bump has not run yet, after a
// holder that ended without Release, is not shown as that holder with its
// token (ErrHolderUnknown); nor is a session that took the key outside
// pglock. After the bump, the grant is shown.
func TestHolderUnconfirmed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const lock = "holder-unconfirmed"
	a, b := h.named(t, lock, "worker-a"), h.named(t, lock, "worker-b")
	mustAcquire(t, a)
	h.terminate(t, a)

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	w := &waitMark{m: b}
	endTurn, err := b.enter(ctx, true, w)
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.s.dialLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.take(ctx, c, true, w); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Holder(ctx); !errors.Is(err, ErrHolderUnknown) {
		t.Errorf("a grant before its bump: %v, %v; want ErrHolderUnknown", st, err)
	}
	rec, err := b.read(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if st := mustHolder(t, a); !st.Held || st.Holder.ID != "worker-b" || st.Holder.Token != rec.tok {
		t.Errorf("after the bump: %v, want held by worker-b with token %v", st, rec.tok)
	}
	b.drop(c, rec)
	endTurn()
	if st := mustHolder(t, a); st.Held {
		t.Errorf("after the grant was given up: %v", st)
	}

	// A client outside pglock takes the key, then also a dead holder's
	// holder lock, which pg_locks showed it: still nobody it can name.
	key := strconv.FormatInt(Key(lock), 10)
	mustAcquire(t, b)
	rows := h.admin(t, "SELECT holder_lock / 4294967296, holder_lock % 4294967296 FROM "+DefaultTable+" WHERE key = $1", key)
	h.terminate(t, b)
	h.waitLocks(t, lock, 0)
	h.admin(t, "SELECT pg_advisory_lock($1::bigint)", key)
	if st, err := b.Holder(ctx); !errors.Is(err, ErrHolderUnknown) {
		t.Errorf("the key held outside pglock: %v, %v; want ErrHolderUnknown", st, err)
	}
	h.admin(t, "SELECT pg_advisory_lock($1::int, $2::int)", string(rows[0][0]), string(rows[0][1]))
	if st, err := b.Holder(ctx); !errors.Is(err, ErrHolderUnknown) {
		t.Errorf("the key and the dead holder's holder lock held outside pglock: %v, %v; want ErrHolderUnknown", st, err)
	}
	h.admin(t, "SELECT pg_advisory_unlock_all()")
}

// TestHolderHostileRecord: a holder's record rewritten by another client
// of the table (an identity WithIdentity refuses, no identity, a time
// that is no time, a token that is no token) gives ErrBadHolderRecord,
// never a panic.
func TestHolderHostileRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const lock = "holder-hostile"
	a := h.named(t, lock, "worker-a")
	l := mustAcquire(t, a)
	key := strconv.FormatInt(Key(lock), 10)
	for _, set := range []string{
		"holder = ''", "holder = NULL", "holder = E'evil\\nline'", "holder = E'\\u202Eevil'",
		"holder = repeat('x', 257)", "holder = repeat('é', 200)",
		"held_since = 'infinity'", "held_since = NULL", "held_since = '0001-01-01 BC'",
		"n = -1",
	} {
		h.admin(t, "ALTER TABLE "+DefaultTable+" DROP CONSTRAINT IF EXISTS "+DefaultTable+"_n_check")
		h.admin(t, "UPDATE "+DefaultTable+" SET "+set+" WHERE key = $1", key)
		if st, err := a.Holder(context.Background()); !errors.Is(err, ErrBadHolderRecord) {
			t.Errorf("%s: %v, %v; want ErrBadHolderRecord", set, st, err)
		}
		h.admin(t, "UPDATE "+DefaultTable+" SET holder = 'worker-a', held_since = now(), n = $2 WHERE key = $1", key, strconv.FormatUint(uint64(l.Token()), 10))
	}
	wantHeld(t, mustHolder(t, a), "worker-a", l)
	mustRelease(t, l)
}

// TestHolderOptions: WithIdentity and WithPollInterval refuse what they
// must, with recipe.ErrBadOption, before anything is sent.
func TestHolderOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []Option{
		WithIdentity(""), WithIdentity("a\x00b"), WithIdentity("a\tb"), WithIdentity("\xff"),
		WithIdentity(strings.Repeat("x", MaxIdentityLen+1)),
		WithPollInterval(MinPollInterval - 1), WithPollInterval(DefaultTTL/2 + 1),
	} {
		if _, err := newOptions([]Option{o}); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("%v, want recipe.ErrBadOption", err)
		}
	}
	if _, err := newOptions([]Option{WithIdentity(strings.Repeat("é", MaxIdentityLen/2)), WithPollInterval(DefaultTTL / 2)}); err != nil {
		t.Errorf("the longest identity and poll interval: %v", err)
	}
	for _, in := range []string{"1765100000.123456", "-3.5", "0", "12"} {
		if _, err := parseEpoch([]byte(in)); err != nil {
			t.Errorf("parseEpoch(%q): %v", in, err)
		}
	}
	if got, _ := parseEpoch([]byte("-3.5")); !got.Equal(time.UnixMicro(-3500000)) {
		t.Errorf("parseEpoch(-3.5) = %v", got)
	}
	for _, in := range []string{"", "-", ".5", "1e9", "Infinity", "NaN", "1.2.3", "999999999999999"} {
		if _, err := parseEpoch([]byte(in)); err == nil {
			t.Errorf("parseEpoch(%q) accepted", in)
		}
	}
}

// next receives the observer's next state, failing the test if the
// channel closes or nothing comes within opTimeout.
func next(t *testing.T, ch <-chan recipe.HolderState) recipe.HolderState {
	t.Helper()
	select {
	case st, ok := <-ch:
		if !ok {
			t.Fatal("the observer's channel closed")
		}
		return st
	case <-time.After(opTimeout):
		t.Fatal("no state from the observer")
	}
	return recipe.HolderState{}
}

// follower checks an observer's states as they come: consecutive states
// differ, tokens never go back.
type follower struct {
	ch   <-chan recipe.HolderState
	last recipe.HolderState
	top  fence.Token
	n    int
}

// until receives states until one satisfies want, and returns it.
func (f *follower) until(t *testing.T, what string, want func(recipe.HolderState) bool) recipe.HolderState {
	t.Helper()
	for {
		st := next(t, f.ch)
		if f.n > 0 && st.Equal(f.last) {
			t.Fatalf("state %v delivered twice in a row", st)
		}
		if st.Held && st.Holder.Token < f.top {
			t.Fatalf("token went back: %v after %v", st, f.top)
		}
		f.last, f.top, f.n = st, max(f.top, st.Holder.Token), f.n+1
		if want(st) {
			return st
		}
		if st.Held {
			t.Fatalf("%s: unexpected %v", what, st)
		}
	}
}

// heldBy is the condition of a state held by id with l's token.
func heldBy(id string, l recipe.Lease) func(recipe.HolderState) bool {
	return func(st recipe.HolderState) bool { return st.Held && st.Holder.ID == id && st.Holder.Token == l.Token() }
}

func free(st recipe.HolderState) bool { return !st.Held }

// TestObserveHolder: an observer started on a free lock follows three
// holders in order, with growing tokens, then the lock free again; one
// started while the lock is held begins with its holder; the channel
// closes when ctx ends and when the Session closes.
func TestObserveHolder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const lock = "holder-observe"
	obs := h.named(t, lock, "observer")
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{ch: obs.ObserveHolder(ctx)}
	f.until(t, "the start", free)
	var prev recipe.Lease
	for _, id := range []string{"worker-a", "worker-b", "worker-c"} {
		l := mustAcquire(t, h.named(t, lock, id))
		if prev != nil && l.Token() <= prev.Token() {
			t.Fatalf("tokens %v then %v", prev.Token(), l.Token())
		}
		f.until(t, id, heldBy(id, l))
		if id == "worker-b" { // an observer started while the lock is held
			late := h.named(t, lock, "late")
			lctx, lcancel := context.WithCancel(context.Background())
			lch := late.ObserveHolder(lctx)
			if st := next(t, lch); !heldBy(id, l)(st) {
				t.Errorf("an observer started while %s holds: first %v", id, st)
			}
			lcancel()
			closes(t, lch, "ctx cancelled")
			closes(t, late.ObserveHolder(lctx), "ObserveHolder with an ended ctx")
		}
		mustRelease(t, l)
		prev = l
	}
	f.until(t, "the end", free)
	cancel()
	closes(t, f.ch, "ctx cancelled")

	s := h.session(t, serverkit.NewFaultProxy(), WithPollInterval(testPoll))
	m, err := New(s, lock)
	if err != nil {
		t.Fatal(err)
	}
	ch := m.ObserveHolder(context.Background())
	next(t, ch)
	s.Close()
	closes(t, ch, "Session closed")
	closes(t, m.ObserveHolder(context.Background()), "ObserveHolder after Close")
	if _, err := m.Holder(context.Background()); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("Holder after Close: %v", err)
	}
}

// closes waits for ch to close, dropping what comes before.
func closes(t *testing.T, ch <-chan recipe.HolderState, what string) {
	t.Helper()
	timeout := time.After(opTimeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatalf("%s: the channel did not close", what)
		}
	}
}

// TestObserveHolderHostile: a record rewritten by another client (an
// identity refused, a token rewound) is not delivered, and the observer
// goes on: it delivers the next holders once their grants rewrite the row.
func TestObserveHolderHostile(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const lock = "holder-observe-hostile"
	key := strconv.FormatInt(Key(lock), 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := h.named(t, lock, "worker-a")
	mustRelease(t, mustAcquire(t, a)) // tokens 1, then 2 for the next
	var logs syncBuffer
	f := &follower{ch: h.named(t, lock, "observer", WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))).ObserveHolder(ctx)}
	f.until(t, "the start", free)
	l := mustAcquire(t, a)
	f.until(t, "worker-a", heldBy("worker-a", l))
	h.admin(t, "UPDATE "+DefaultTable+" SET holder = E'\\x1b[31mmallory' WHERE key = $1", key)
	waitFor(t, func() bool { return strings.Contains(logs.String(), "unprintable character U+001B") }, "no warning of the malformed identity")
	h.admin(t, "UPDATE "+DefaultTable+" SET holder = 'mallory', n = 1 WHERE key = $1", key)
	waitFor(t, func() bool { return strings.Contains(logs.String(), "token 1 after") }, "no warning of the token going back")
	if out := logs.String(); strings.Contains(out, "\x1b") || !strings.Contains(out, "level=WARN") {
		t.Errorf("the observer's log shows the identity, or no warning:\n%s", out)
	}
	h.admin(t, "UPDATE "+DefaultTable+" SET holder = 'worker-a', n = $2 WHERE key = $1", key, strconv.FormatUint(uint64(l.Token()), 10))
	mustRelease(t, l)
	b := h.named(t, lock, "worker-b")
	lb := mustAcquire(t, b)
	f.until(t, "worker-b", heldBy("worker-b", lb))
	mustRelease(t, lb)
	f.until(t, "the end", free)
}

// TestHolderOldTable: a token table made before the holder columns, which
// the role cannot change: grants run the older statements, Holder answers
// ErrTokenTable naming the ALTER TABLE, ObserveHolder closes at once. A
// table the role owns gets the columns at Connect.
func TestHolderOldTable(t *testing.T) {
	t.Parallel()
	f := newTrustFixture(t)
	const old = " (key bigint PRIMARY KEY, name text NOT NULL, n bigint NOT NULL CHECK (n > 0), held bigint, unclean_at timestamptz)"
	f.exec(t, f.adm, "CREATE TABLE public.admins"+old+"; GRANT SELECT, INSERT, UPDATE ON public.admins TO "+f.app)
	s, err := f.connect(t, WithTable("admins"))
	if err != nil {
		t.Fatalf("Connect to an older table it can't change: %v", err)
	}
	m, err := New(s, "x", WithLockDelay(time.Second)) // the delay's columns are there
	if err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, m)
	if _, err := m.Holder(context.Background()); !errors.Is(err, ErrTokenTable) || !strings.Contains(err.Error(), "ALTER TABLE") {
		t.Errorf("Holder on an older table: %v; want ErrTokenTable with the ALTER TABLE", err)
	}
	closes(t, m.ObserveHolder(context.Background()), "ObserveHolder on an older table")
	mustRelease(t, l)

	f.exec(t, f.conn(t, f.app), "CREATE TABLE public.mine"+old)
	s, err = f.connect(t, WithTable("mine"), WithIdentity("app"))
	if err != nil {
		t.Fatal(err)
	}
	if m, err = New(s, "x"); err != nil {
		t.Fatal(err)
	}
	l = mustAcquire(t, m)
	if st, err := m.Holder(context.Background()); err != nil || st.Holder.ID != "app" {
		t.Errorf("Holder on a migrated table: %v, %v", st, err)
	}
	mustRelease(t, l)
}
