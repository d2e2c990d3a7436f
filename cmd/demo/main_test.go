package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

func TestMain(m *testing.M) { zktest.MainThen(m, pgtest.StopShared) }

// TestDemoScenes runs every scene of the demo against a real server, scene
// 1 with its default database (a SQLite file): every invariant the demo
// prints must hold (the same checks make the demo exit non-zero).
func TestDemoScenes(t *testing.T) {
	cl := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := openStore(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	d := &demo{start: time.Now(), logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		servers: cl.Servers(), root: "/demo", store: st}
	if !d.kleppmann(ctx) {
		t.Fatal("scene 1 (stale holder) violated an invariant")
	}
	if !d.contention(ctx, 4, 10) {
		t.Fatal("scene 2 (contention) violated an invariant")
	}
	if !d.leaderElection(ctx) {
		t.Fatal("scene 3 (leader election) violated an invariant")
	}
}

// TestDemoStorePostgres: scene 1's database when ZKRECIPES_DEMO_DSN names a
// PostgreSQL: B's write lands, A's older token is refused by the database,
// and the demo's rows are gone afterwards (its tables stay).
func TestDemoStorePostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.Shared(t).Database(t)
	st, err := openStore(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	const res = "/zkrecipes-demo/1/storage"
	if err := st.write(ctx, res, 20, "written by B"); err != nil {
		t.Fatal(err)
	}
	if err := st.write(ctx, res, 19, "stale write by A"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("A's write: %v", err)
	}
	if v, high, err := st.read(ctx, res); err != nil || v != "written by B" || high != 20 {
		t.Fatalf("read: %q %v %v", v, high, err)
	}
	st.forget(res)
	if v, high, err := st.read(ctx, res); err != nil || v != "" || high != 0 {
		t.Fatalf("after forget: %q %v %v", v, high, err)
	}
	// Opening again finds the tables in place.
	st2, err := openStore(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	st2.close()
}
