package pglock

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/pgtest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// TestHijackedStatements: mallory, with CREATE on public, plants every
// overload pgtest.PlantHijack has (exact matches beating pg_catalog's
// coerced operators and functions, same-signature copies of
// pg_advisory_lock and the rest, domains named like pg_catalog's types).
// No statement of Connect (table check, CREATE, the to_regclass after a
// failed CREATE), Acquire (try, then wait), the token bump, a failed
// Acquire's unlock_all, TryAcquire or Release may run one, with the
// default search_path or one listing public before pg_catalog.
func TestHijackedStatements(t *testing.T) {
	f := newTrustFixture(t)
	f.exec(t, f.adm, "CREATE SCHEMA locked; GRANT USAGE ON SCHEMA locked TO "+f.app) // no CREATE: Connect's CREATE fails
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
		if n, what := h.Hits(t); n != 0 {
			t.Fatalf("search_path %q: the attacker's objects ran %d times: %q", path, n, what)
		}
	}
}
