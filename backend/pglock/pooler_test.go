package pglock

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// TestPgBouncer: through PgBouncer in transaction mode a session-level lock
// would stay on a server connection that other clients then use. PgBouncer
// as configured by default refuses the startup parameters every lock
// connection sends; told to ignore them, it is seen through by the backend
// pid check, at Connect and at every Acquire, and nothing is locked.
func TestPgBouncer(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()

	strict := pgtest.StartBouncer(t, h.dsn, "transaction")
	if _, err := Connect(ctx, strict.DSN()); err == nil || !strings.Contains(err.Error(), "unsupported startup parameter") {
		t.Errorf("Connect through PgBouncer refusing our parameters: %v, want the refusal", err)
	}

	params := (&Session{cfg: h.cfg.Copy(), ttl: DefaultTTL, ping: DefaultTTL / 10}).pgParams()
	lax := pgtest.StartBouncer(t, h.dsn, "transaction", slices.Sorted(maps.Keys(params))...)
	if _, err := Connect(ctx, lax.DSN()); !errors.Is(err, ErrPooler) {
		t.Errorf("Connect through PgBouncer ignoring our parameters: %v, want ErrPooler", err)
	}

	// A session checked directly, whose lock connections then go through
	// PgBouncer (a DNS name moved to the pooler, say).
	c := h.NewClient(t, "pooled").(*client)
	bcfg, err := pgconn.ParseConfig(lax.DSN())
	if err != nil {
		t.Fatal(err)
	}
	c.s.cfg.Host, c.s.cfg.Port, c.s.cfg.DialFunc = bcfg.Host, bcfg.Port, bcfg.DialFunc
	if _, err := c.Acquire(ctx); !errors.Is(err, ErrPooler) {
		t.Errorf("Acquire through PgBouncer: %v, want ErrPooler", err)
	}
	if _, err := c.TryAcquire(ctx); !errors.Is(err, ErrPooler) {
		t.Errorf("TryAcquire through PgBouncer: %v, want ErrPooler", err)
	}
	h.waitLocks(t, "pooled", 0)
}
