package fencerace_test

import (
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"github.com/zkrecipes/zkrecipes/resource/fencesql/fencesqltest"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

var (
	runFor  = flag.Duration("fencesql.duration", 2*time.Second, "length of each concurrent run at a database's default level (other runs: half)")
	workers = flag.Int("fencesql.workers", 8, "concurrent writers, each on its own connection")
)

// The concurrent runs of resource/fencesql (here, in the nemesis module,
// for porcupine's sake): many goroutines, each on a connection of its own,
// write one register with interleaved tokens (older, equal, newer), and
// every call and its answer is recorded as a nemesis.Op. The history must
// pass nemesis.CheckRegister (no write over a higher token, no lost update,
// each accepted write over exactly the state the previous one left, and
// linearizable with porcupine against a register that applies a write iff
// its token is at least the stored one: so the accepted writes are exactly
// those whose token was at least every token accepted before them), the
// final state must be the last accepted write, carrying the highest token
// accepted, and the writes visible in the database must be exactly those of
// the accepted calls.

// tokens hands out interleaved tokens: 3 in 10 an older holder's (stale if
// a newer one was accepted), 4 in 10 the newest holder's again (equal), 3
// in 10 a new holder's.
type tokens struct{ newest atomic.Uint64 }

func (c *tokens) pick(rng *rand.Rand) fence.Token {
	switch r := rng.IntN(10); {
	case r < 3:
		return fence.Token(max(c.newest.Load()-uint64(1+rng.IntN(3)), 1))
	case r < 7:
		return fence.Token(c.newest.Load())
	default:
		return fence.Token(c.newest.Add(1))
	}
}

// recorder collects a run's calls.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []nemesis.Op
}

func (r *recorder) now() time.Duration { return time.Since(r.start) }

func (r *recorder) add(op nemesis.Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
}

// outcome classifies a call's answer; a stale answer must name a higher
// token than the call's.
func outcome(t *testing.T, err error, tok fence.Token) nemesis.Outcome {
	var se *fence.StaleError
	switch {
	case err == nil:
		return nemesis.Accepted
	case errors.As(err, &se):
		if se.Highest <= tok {
			t.Errorf("stale answer for token %v names highest %v", tok, se.Highest)
		}
		return nemesis.Stale
	case errors.Is(err, fence.ErrUncertain):
		return nemesis.Unknown
	case errors.Is(err, fencesql.ErrConflict):
		return nemesis.Failed // refused, nothing committed
	}
	t.Errorf("unexpected error: %v", err)
	return nemesis.Failed
}

// drive runs call from *workers goroutines for d.
func drive(d time.Duration, call func(worker, i int, rng *rand.Rand)) {
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 12))
			for i := 0; time.Now().Before(deadline); i++ {
				call(w, i, rng)
			}
		}()
	}
	wg.Wait()
}

// verify checks a run's history against the final state and the values the
// database shows as written.
func verify(t *testing.T, name string, rec *recorder, final nemesis.State, highest fence.Token, visible []string) {
	t.Helper()
	end := rec.now()
	for _, v := range nemesis.CheckRegister(name, rec.ops, end) {
		t.Error(v)
	}
	by := map[nemesis.Outcome]int{}
	var accepted []nemesis.Op
	equal, newer := 0, 0
	for _, o := range rec.ops {
		by[o.Outcome]++
		if o.Outcome == nemesis.Accepted {
			accepted = append(accepted, o)
			if o.Token == o.Prev.Token {
				equal++
			} else {
				newer++
			}
		}
	}
	sort.Slice(accepted, func(i, j int) bool { return accepted[i].Seq < accepted[j].Seq })
	t.Logf("%s: %d calls in %v (%.0f/s) by %d writers: %d accepted (%d with the stored token, %d newer), %d stale, %d conflicts, %d unknown",
		name, len(rec.ops), end.Round(time.Millisecond), float64(len(rec.ops))/end.Seconds(), *workers,
		len(accepted), equal, newer, by[nemesis.Stale], by[nemesis.Failed], by[nemesis.Unknown])
	if equal == 0 || newer == 0 || by[nemesis.Stale] == 0 {
		t.Errorf("the run did not mix equal (%d), newer (%d) and stale (%d) tokens", equal, newer, by[nemesis.Stale])
	}
	if len(accepted) == 0 {
		return
	}
	last, top := accepted[len(accepted)-1], fence.Token(0)
	for _, o := range accepted {
		top = max(top, o.Token)
	}
	if final != (nemesis.State{Token: last.Token, Value: last.Value}) || final.Token != top || highest != top {
		t.Errorf("final state %+v, highest %v; want the last accepted write (%v,%q), token %v", final, highest, last.Token, last.Value, top)
	}
	want := map[string]bool{}
	for _, o := range accepted {
		want[o.Value] = true
	}
	if by[nemesis.Unknown] == 0 && len(visible) != len(want) {
		t.Errorf("%d writes visible in the database, %d accepted", len(visible), len(want))
	}
	for _, v := range visible {
		if !want[v] {
			t.Errorf("the write %q is visible, but its call was not accepted", v)
		}
	}
}

// runDo is the concurrent run of Do: the function reads the register's row,
// writes the next one (a counter gives the order of application) and logs
// its value in table writes.
func runDo(t *testing.T, db *sql.DB, d time.Duration, opts ...fencesql.Option) {
	f := fencesqltest.NewFence(t, db, opts...)
	p := f.Dialect().Placeholder
	fencesqltest.Exec(t, db,
		"CREATE TABLE reg (id INTEGER PRIMARY KEY, token BIGINT NOT NULL, value TEXT NOT NULL, seq BIGINT NOT NULL)",
		"INSERT INTO reg VALUES (1, 0, '', 0)",
		"CREATE TABLE writes (value TEXT PRIMARY KEY)")
	update := fmt.Sprintf("UPDATE reg SET token = %s, value = %s, seq = %s WHERE id = 1", p(1), p(2), p(3))
	logged := "INSERT INTO writes (value) VALUES (" + p(1) + ")"
	db.SetMaxIdleConns(*workers)
	ctx := ctxT(t)
	var toks tokens
	toks.newest.Store(10)
	rec := &recorder{start: time.Now()}
	drive(d, func(w, i int, rng *rand.Rand) {
		tok := toks.pick(rng)
		op := nemesis.Op{Kind: nemesis.OpWrite, Client: w, Token: tok, Register: "sql", Value: fmt.Sprintf("w%d-%d", w, i), Call: rec.now()}
		var prev nemesis.State
		var seq int64
		called := false
		err := f.Do(ctx, "reg", tok, func(tx *sql.Tx) error {
			called = true
			var pt int64
			if err := tx.QueryRowContext(ctx, "SELECT token, value, seq FROM reg WHERE id = 1").Scan(&pt, &prev.Value, &seq); err != nil {
				return err
			}
			prev.Token = fence.Token(pt)
			if _, err := tx.ExecContext(ctx, update, int64(tok), op.Value, seq+1); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, logged, op.Value)
			return err
		})
		op.Return = rec.now()
		op.Outcome = outcome(t, err, tok)
		if op.Outcome == nemesis.Stale && called {
			t.Errorf("the function ran for a stale token %v", tok)
		}
		if op.Outcome == nemesis.Accepted {
			op.Prev, op.Seq = prev, seq+1
		}
		rec.add(op)
	})

	var final nemesis.State
	var ft int64
	if err := db.QueryRowContext(ctx, "SELECT token, value FROM reg WHERE id = 1").Scan(&ft, &final.Value); err != nil {
		t.Fatal(err)
	}
	final.Token = fence.Token(ft)
	verify(t, "sql", rec, final, fencesqltest.Highest(t, f, "reg"), column(t, db, "SELECT value FROM writes"))
}

func column(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.QueryContext(ctxT(t), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestConcurrentDoPostgres(t *testing.T) {
	t.Run("read-committed", func(t *testing.T) { runDo(t, pgtest.Schema(t), *runFor) })
	t.Run("repeatable-read", func(t *testing.T) {
		runDo(t, pgtest.Schema(t), *runFor/2, fencesql.WithIsolation(sql.LevelRepeatableRead))
	})
	t.Run("serializable", func(t *testing.T) {
		runDo(t, pgtest.Schema(t), *runFor/2, fencesql.WithIsolation(sql.LevelSerializable))
	})
}

func TestConcurrentDoSQLite(t *testing.T) {
	t.Run("defaults", func(t *testing.T) { runDo(t, fencesqltest.SQLite(t, ""), *runFor) })
	t.Run("wal", func(t *testing.T) {
		runDo(t, fencesqltest.SQLite(t, "_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)"), *runFor/2)
	})
}

// runUpdate is the concurrent run of Update on one row. A trigger logs
// every change of the row (old and new fence and value, in the order
// applied: the row lock or SQLite's write lock orders them), which gives
// each accepted call the state it overwrote and shows any write of a
// refused call.
func runUpdate(t *testing.T, db *sql.DB, d time.Duration) {
	f := fencesqltest.NewFence(t, db)
	p := f.Dialect().Placeholder
	fencesqltest.Exec(t, db, "CREATE TABLE acct (id INTEGER PRIMARY KEY, value TEXT NOT NULL, fence BIGINT NOT NULL DEFAULT 0)",
		"INSERT INTO acct (id, value) VALUES (1, '')")
	if f.Dialect() == fencesql.Postgres {
		fencesqltest.Exec(t, db, "CREATE TABLE acct_log (n BIGSERIAL PRIMARY KEY, old_fence BIGINT, old_value TEXT, new_fence BIGINT, new_value TEXT)",
			`CREATE FUNCTION acct_logged() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			INSERT INTO acct_log (old_fence, old_value, new_fence, new_value) VALUES (OLD.fence, OLD.value, NEW.fence, NEW.value);
			RETURN NEW; END $$`,
			"CREATE TRIGGER acct_logged AFTER UPDATE ON acct FOR EACH ROW EXECUTE FUNCTION acct_logged()")
	} else {
		fencesqltest.Exec(t, db, "CREATE TABLE acct_log (n INTEGER PRIMARY KEY AUTOINCREMENT, old_fence INTEGER, old_value TEXT, new_fence INTEGER, new_value TEXT)",
			`CREATE TRIGGER acct_logged AFTER UPDATE ON acct BEGIN
			INSERT INTO acct_log (old_fence, old_value, new_fence, new_value) VALUES (OLD.fence, OLD.value, NEW.fence, NEW.value); END`)
	}
	db.SetMaxIdleConns(*workers)
	ctx := ctxT(t)
	row := fencesql.Row{Table: "acct", Key: "id", ID: 1}
	var toks tokens
	toks.newest.Store(10)
	rec := &recorder{start: time.Now()}
	drive(d, func(w, i int, rng *rand.Rand) {
		tok := toks.pick(rng)
		op := nemesis.Op{Kind: nemesis.OpWrite, Client: w, Token: tok, Register: "sql-column", Value: fmt.Sprintf("w%d-%d", w, i), Call: rec.now()}
		err := f.Update(ctx, db, tok, row, "value = "+p(1), op.Value)
		op.Return = rec.now()
		op.Outcome = outcome(t, err, tok)
		rec.add(op)
	})

	rows, err := db.QueryContext(ctx, "SELECT n, old_fence, old_value, new_fence, new_value FROM acct_log ORDER BY n")
	if err != nil {
		t.Fatal(err)
	}
	type change struct {
		n        int64
		old      nemesis.State
		newToken int64
	}
	log := map[string]change{}
	var visible []string
	for rows.Next() {
		var c change
		var ot int64
		var nv string
		if err := rows.Scan(&c.n, &ot, &c.old.Value, &c.newToken, &nv); err != nil {
			t.Fatal(err)
		}
		c.old.Token = fence.Token(ot)
		log[nv] = c
		visible = append(visible, nv)
	}
	rows.Close()
	for i, o := range rec.ops {
		c, ok := log[o.Value]
		if o.Outcome == nemesis.Accepted {
			if !ok || fence.Token(c.newToken) != o.Token {
				t.Errorf("accepted call %v is not in the row's log (%+v)", o, c)
				continue
			}
			rec.ops[i].Prev, rec.ops[i].Seq = c.old, c.n
		}
	}
	var final nemesis.State
	var ft int64
	if err := db.QueryRowContext(ctx, "SELECT fence, value FROM acct WHERE id = 1").Scan(&ft, &final.Value); err != nil {
		t.Fatal(err)
	}
	final.Token = fence.Token(ft)
	verify(t, "sql-column", rec, final, final.Token, visible)
}

func TestConcurrentUpdatePostgres(t *testing.T) { runUpdate(t, pgtest.Schema(t), *runFor/2) }

func TestConcurrentUpdateSQLite(t *testing.T) { runUpdate(t, fencesqltest.SQLite(t, ""), *runFor/2) }
