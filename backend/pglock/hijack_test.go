package pglock

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// TestHijackedStatements: mallory, with CREATE on public, plants every
// overload pgtest.PlantHijack has (exact matches beating pg_catalog's
// coerced operators and functions, same-signature copies of
// pg_advisory_lock and the rest, domains named like pg_catalog's types).
// No statement of Connect (table check, CREATE, the to_regclass after a
// failed CREATE), Acquire (try, then wait), the token bump, a failed
// Acquire's unlock_all, TryAcquire, Holder, ObserveHolder or Release may run one, with the
// default search_path or one listing public before pg_catalog; nor may
// those of the lock-delay (hijackedDelay).
func TestHijackedStatements(t *testing.T) {
	t.Parallel()
	f := newTrustFixture(t)
	f.exec(t, f.adm, "CREATE SCHEMA locked; GRANT USAGE ON SCHEMA locked TO "+f.app) // no CREATE: Connect's CREATE fails
	// A token table made before the lock-delay: Connect adds its columns.
	f.exec(t, f.conn(t, f.app), "CREATE TABLE public.old_tokens (key bigint PRIMARY KEY, name text NOT NULL, n bigint NOT NULL)")
	malloryDSN, err := pgtest.AsRole(f.dsn, f.mallory)
	if err != nil {
		t.Fatal(err)
	}
	h := pgtest.PlantHijack(t, malloryDSN)
	for _, path := range []string{"", "public,pg_catalog"} {
		connect := func(opts ...Option) (*Session, error) {
			cfg := f.cfg(t, f.app)
			if path != "" {
				cfg.RuntimeParams["search_path"] = path
			}
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			opts = append([]Option{WithTTL(testTTL), WithLogger(slog.New(slog.DiscardHandler))}, opts...)
			s, err := ConnectConfig(ctx, cfg, opts...)
			if err == nil {
				t.Cleanup(func() { s.Close() })
			}
			return s, err
		}
		if _, err := connect(WithTable("locked.tokens")); !errors.Is(err, ErrTokenTable) {
			t.Fatalf("search_path %q: Connect without CREATE: %v; want ErrTokenTable", path, err)
		}
		s, err := connect()
		if err != nil {
			t.Fatalf("search_path %q: Connect: %v", path, err)
		}
		m, err := New(s, "victim")
		if err != nil {
			t.Fatal(err)
		}
		l := mustAcquire(t, m)
		if st, err := m.Holder(context.Background()); err != nil || st.Holder.Token != l.Token() {
			t.Fatalf("Holder: %v, %v", st, err)
		}
		octx, stop := context.WithCancel(context.Background())
		if st := <-m.ObserveHolder(octx); st.Holder.Token != l.Token() {
			t.Fatalf("ObserveHolder: %v", st)
		}
		stop()
		if _, err := m.TryAcquire(context.Background()); !errors.Is(err, recipe.ErrLocked) {
			t.Fatalf("TryAcquire of a held lock: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err = m.Acquire(ctx) // waits in the server's queue, gives up, unlocks all
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire of a held lock: %v", err)
		}
		mustRelease(t, l)
		l2 := mustAcquire(t, m)
		if l2.Token() <= l.Token() {
			t.Errorf("tokens %v then %v, want increasing", l.Token(), l2.Token())
		}
		mustRelease(t, l2)
		hijackedDelay(t, f.adm, connect)
		if n, what := h.Hits(t); n != 0 {
			t.Fatalf("search_path %q: the attacker's objects ran %d times: %q", path, n, what)
		}
	}
}

// hijackedDelay runs the lock-delay's statements on a session from
// connect: Connect adding the columns to an older table, the marking bump,
// a TryAcquire and an Acquire serving a delay after an unclean end (the
// administrator adm terminates the holder's server session), the clear
// after it, the clean Release.
func hijackedDelay(t *testing.T, adm *pgconn.PgConn, connect func(...Option) (*Session, error)) {
	t.Helper()
	s, err := connect(WithTable("old_tokens"))
	if err != nil {
		t.Fatalf("Connect to an older table: %v", err)
	}
	// The delay outlasts the time from TryAcquire's bump to Acquire's (a
	// hang-up, a dial, two statements), which passed 300 ms on a busy
	// machine, and 1 s with the package's tests running at once: the delay
	// was over before Acquire could serve any of it.
	m, err := New(s, "victim", WithLockDelay(4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, m)
	if _, err := query(context.Background(), adm, "SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_locks "+
		"WHERE locktype OPERATOR(pg_catalog.=) 'advisory' AND granted AND classid OPERATOR(pg_catalog.=) $1::pg_catalog.oid "+
		"AND objid OPERATOR(pg_catalog.=) $2::pg_catalog.oid AND database OPERATOR(pg_catalog.=) "+
		"(SELECT oid FROM pg_catalog.pg_database WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database())",
		strconv.FormatUint(uint64(m.key)>>32, 10), strconv.FormatUint(uint64(m.key)&0xffffffff, 10)); err != nil {
		t.Fatal(err)
	}
	<-l.Context().Done()
	if _, err := m.TryAcquire(context.Background()); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire on a pending lock-delay: %v", err)
	}
	l = mustAcquire(t, m)
	if recipe.LockDelayServed(l) <= 0 {
		t.Errorf("no delay served after the holder's session was terminated")
	}
	mustRelease(t, l)
}
