package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx", for fencesql

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/backend/pglock"
	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// switchStage is one backend of TestSwitchBackends: newLock opens a session
// of its own (closed at the test's end) and returns the lock, unwrapped.
type switchStage struct {
	name    string
	newLock func(t *testing.T) recipe.Lock
}

// switchStages are ZooKeeper, PostgreSQL, etcd, Redis and ZooKeeper again
// (the same lock as the first stage's), on the test harnesses' servers.
func switchStages(t *testing.T, ctx context.Context, dsn, name string) []switchStage {
	cl := zktest.Shared(t)
	zk := switchStage{"ZooKeeper", func(t *testing.T) recipe.Lock {
		s, err := zookeeper.Connect(ctx, cl.Servers(), zookeeper.WithLogger(discardLog))
		noErr(t, err)
		t.Cleanup(func() { s.Close() })
		m, err := mutex.New(s, name)
		noErr(t, err)
		return m
	}}
	etcd := etcdtest.Shared(t)
	etcdURL := "etcd://" + etcd.Endpoints()[0] + etcdtest.Prefix(t, etcd)
	redisURL := "redis://" + redistest.Start(t).Addr() + "/0"
	return []switchStage{zk,
		{"PostgreSQL", func(t *testing.T) recipe.Lock {
			s, err := pglock.Connect(ctx, dsn, pglock.WithLogger(discardLog))
			noErr(t, err)
			t.Cleanup(func() { s.Close() })
			m, err := pglock.New(s, name)
			noErr(t, err)
			return m
		}},
		{"etcd", func(t *testing.T) recipe.Lock {
			s, err := etcdlock.Connect(ctx, etcdURL, etcdlock.WithLogger(discardLog))
			noErr(t, err)
			t.Cleanup(func() { s.Close() })
			m, err := etcdlock.New(s, name)
			noErr(t, err)
			return m
		}},
		{"Redis", func(t *testing.T) recipe.Lock {
			s, err := redislock.Connect(ctx, redisURL, redislock.WithLogger(discardLog))
			noErr(t, err)
			t.Cleanup(func() { s.Close() })
			m, err := redislock.New(s, name)
			noErr(t, err)
			return m
		}},
		zk,
	}
}

// TestSwitchBackends moves a lock, and the SQL resources it fences (a
// fencesql row on PostgreSQL, and a row of the job's table with its own
// fence column, written with fencesql.Update), ZooKeeper → PostgreSQL →
// etcd → Redis → ZooKeeper, as docs/backends.md#switching-backends tells
// an operator: stage i's locks are recipe.InEra(lock, i) (the first
// stage's are unwrapped: era 0 as it was deployed), and the switch is
// RaiseFloor and RaiseColumnFloor to era i's floor. At every switch:
//   - the old backend's holder, still holding its live lease, writes both
//     right after the raise, before any new holder wrote (the raise alone
//     must refuse it), and after the new holder, and is refused
//     (fence.ErrStale), and so is a holder the old backend grants after
//     the switch (it keeps running);
//   - the new backend's holders write at once: the first attempt of each
//     is accepted, with no wait;
//
// and the tokens the resource accepted over the whole run strictly
// increase, every accepted write being one grant's.
func TestSwitchBackends(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.Shared(t).Database(t)
	db, err := sql.Open("pgx", dsn)
	noErr(t, err)
	t.Cleanup(func() { db.Close() })
	fn, err := fencesql.New(db)
	noErr(t, err)
	noErr(t, fn.CreateTable(ctx))
	_, err = db.ExecContext(ctx, "CREATE TABLE writes (seq BIGSERIAL PRIMARY KEY, token BIGINT NOT NULL, who TEXT NOT NULL)")
	noErr(t, err)
	_, err = db.ExecContext(ctx, "CREATE TABLE jobs (id BIGINT PRIMARY KEY, state TEXT NOT NULL, fence BIGINT NOT NULL DEFAULT 0)")
	noErr(t, err)
	_, err = db.ExecContext(ctx, "INSERT INTO jobs (id, state) VALUES (2, 'new')")
	noErr(t, err)
	const resource = "reports/nightly"
	job := fencesql.Row{Table: "jobs", Key: "id", ID: 2}
	// write is a fenced write of the resource: it lands with its token
	// (recorded in writes), or not at all; then the same holder's fenced
	// Update of the job's row. Each error is checked by the caller.
	write := func(who string, token fence.Token) (doErr, rowErr error) {
		doErr = fn.Do(ctx, resource, token, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO writes (token, who) VALUES ($1, $2)", int64(token), who)
			return err
		})
		return doErr, fencesql.Update(ctx, db, token, job, "state = $1", who)
	}
	// accepted and refused are write's two outcomes the test wants.
	accepted := func(who string, token fence.Token) {
		t.Helper()
		doErr, rowErr := write(who, token)
		noErr(t, doErr)
		noErr(t, rowErr)
	}
	refused := func(step, who string, token fence.Token) {
		t.Helper()
		doErr, rowErr := write(who, token)
		if !errors.Is(doErr, fence.ErrStale) {
			t.Fatalf("%s: %s (token %v) wrote the fence row after the switch: %v", step, who, token, doErr)
		}
		if !errors.Is(rowErr, fence.ErrStale) {
			t.Fatalf("%s: %s (token %v) updated the job's row after the switch: %v", step, who, token, rowErr)
		}
	}
	stages := switchStages(t, ctx, dsn, lockName(t))
	t.Logf("servers up (started or shared) in %v", time.Since(begin).Round(time.Millisecond))
	begin = time.Now()

	// Before any switch: the ZooKeeper lock as deployed, unwrapped.
	old := acquire(t, ctx, stages[0].newLock(t), "ZooKeeper holder")
	accepted("ZooKeeper holder", old.Token())
	oldLock := stages[0].newLock(t)
	for i, st := range stages[1:] {
		era := fence.Era(i + 1)
		stepStart := time.Now()
		// The operator's step: raise the fences to the new era.
		mark, err := fn.RaiseFloor(ctx, resource, era.Floor())
		if err != nil || mark != era.Floor() {
			t.Fatalf("%s: RaiseFloor = %v, %v; want %v", st.name, mark, err, era.Floor())
		}
		if n, err := fencesql.RaiseColumnFloor(ctx, db, "jobs", "fence", era.Floor()); err != nil || n != 1 {
			t.Fatalf("%s: RaiseColumnFloor = %d, %v; want the job's row raised", st.name, n, err)
		}
		// At once, before any holder of the new era wrote: the old
		// backend's holder, its lease live, is refused by the raise alone.
		if err := old.Context().Err(); err != nil {
			t.Fatalf("%s: the old holder's lease ended (%v): the test wants it live", st.name, context.Cause(old.Context()))
		}
		refused(st.name+", right after the raise", "the old backend's live holder", old.Token())
		// The new backend's holders, one after the other: each writes at once.
		lock := recipe.InEra(st.newLock(t), era)
		first := acquire(t, ctx, lock, st.name+" holder")
		granted := time.Now()
		accepted(st.name+" holder", first.Token())
		wrote := time.Since(granted)
		// The old backend's holder still holds its lease, and is refused
		// still.
		if err := old.Context().Err(); err != nil {
			t.Fatalf("%s: the old holder's lease ended (%v): the test wants it live", st.name, context.Cause(old.Context()))
		}
		refused(st.name, "the old backend's live holder", old.Token())
		noErr(t, old.Release(ctx))
		// The old backend still grants: its next holder is refused too.
		late := acquire(t, ctx, oldLock, "old backend's next holder")
		refused(st.name, "a grant of the old backend after the switch", late.Token())
		noErr(t, late.Release(ctx))
		noErr(t, first.Release(ctx))
		// The next holder on the new backend: a new grant, a larger token.
		old = acquire(t, ctx, lock, st.name+" next holder")
		accepted(st.name+" next holder", old.Token())
		oldLock = lock
		t.Logf("%s (era %d): raise, connect and grant in %v, the first write in %v; tokens %v, %v", st.name, era,
			granted.Sub(stepStart).Round(time.Millisecond), wrote.Round(time.Millisecond), first.Token(), old.Token())
	}
	noErr(t, old.Release(ctx))
	checkWrites(t, ctx, db, 1+2*(len(stages)-1))
	var state string
	noErr(t, db.QueryRowContext(ctx, "SELECT state FROM jobs WHERE id = 2").Scan(&state))
	if want := stages[len(stages)-1].name + " next holder"; state != want {
		t.Errorf("the job's row was last written by %q, want %q", state, want)
	}
	t.Logf("the switches: %v", time.Since(begin).Round(time.Millisecond))
}

// checkWrites checks that the resource holds n writes, none of an old
// holder, with strictly increasing tokens in the order they landed.
func checkWrites(t *testing.T, ctx context.Context, db *sql.DB, n int) {
	t.Helper()
	rows, err := db.QueryContext(ctx, "SELECT token, who FROM writes ORDER BY seq")
	noErr(t, err)
	defer rows.Close()
	var prev int64
	var got []string
	for rows.Next() {
		var tok int64
		var who string
		noErr(t, rows.Scan(&tok, &who))
		got = append(got, fmt.Sprintf("%s %d", who, tok))
		if tok <= prev {
			t.Errorf("token %d (%s) landed after %d", tok, who, prev)
		}
		prev = tok
	}
	noErr(t, rows.Err())
	if len(got) != n {
		t.Errorf("%d writes landed, want %d: %q", len(got), n, got)
	}
}

// acquire takes l, failing the test on an error.
func acquire(t *testing.T, ctx context.Context, l recipe.Lock, who string) recipe.Lease {
	t.Helper()
	lease, err := l.Acquire(ctx)
	if err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	return lease
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// discardLog drops the sessions' log lines.
var discardLog = slog.New(slog.NewTextHandler(io.Discard, nil))
