package fencesql_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"modernc.org/sqlite"
)

// put returns a Do function that stores v under key k of table data.
func put(f *fencesql.Fence, k, v string, called *bool) func(tx *sql.Tx) error {
	p := f.Dialect().Placeholder
	return func(tx *sql.Tx) error {
		if called != nil {
			*called = true
		}
		_, err := tx.Exec("INSERT INTO data (k, v) VALUES ("+p(1)+", "+p(2)+") ON CONFLICT (k) DO UPDATE SET v = excluded.v", k, v)
		return err
	}
}

func get(t *testing.T, db *sql.DB, f *fencesql.Fence, k string) string {
	t.Helper()
	var v string
	err := db.QueryRow("SELECT v FROM data WHERE k = "+f.Dialect().Placeholder(1), k).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return v
}

// TestDoRejectsAStaleHolder is the 33/34 scenario at the database: holder
// 34 writes, holder 33 resumes and its write is refused by the fence row,
// its function never called; 34 writes again (equal token); a failing or
// panicking function commits nothing, not even the token.
func TestDoRejectsAStaleHolder(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *sql.DB) {
		ctx := ctxT(t)
		f := newFence(t, db)
		mustExec(t, db, "CREATE TABLE data (k TEXT PRIMARY KEY, v TEXT NOT NULL)")

		if err := f.Do(ctx, "accounts", 34, put(f, "a", "by 34", nil)); err != nil {
			t.Fatal(err)
		}
		called := false
		err := f.Do(ctx, "accounts", 33, put(f, "a", "by 33", &called))
		var se *fence.StaleError
		if !errors.Is(err, fence.ErrStale) || !errors.As(err, &se) || se.Token != 33 || se.Highest != 34 || se.Resource != "accounts" {
			t.Fatalf("stale write: %v", err)
		}
		if called || get(t, db, f, "a") != "by 34" {
			t.Fatalf("the stale holder's function ran (%v) or its write landed: %q", called, get(t, db, f, "a"))
		}
		if err := f.Do(ctx, "accounts", 34, put(f, "a", "by 34 again", nil)); err != nil || get(t, db, f, "a") != "by 34 again" {
			t.Fatalf("equal token: %v", err)
		}

		boom := errors.New("boom")
		err = f.Do(ctx, "accounts", 40, func(tx *sql.Tx) error {
			if err := put(f, "a", "by 40", nil)(tx); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) || highest(t, f, "accounts") != 34 || get(t, db, f, "a") != "by 34 again" {
			t.Fatalf("a failed function committed something: %v, highest %v, %q", err, highest(t, f, "accounts"), get(t, db, f, "a"))
		}
		// A panic in fn propagates, with its value, after the transaction is
		// rolled back (token not advanced) and the connection returned.
		func() {
			defer func() {
				if r := recover(); r != "write failed" {
					t.Fatalf("the panic did not propagate: %v", r)
				}
			}()
			f.Do(ctx, "accounts", 41, func(tx *sql.Tx) error {
				put(f, "a", "by 41", nil)(tx)
				panic("write failed")
			})
		}()
		if highest(t, f, "accounts") != 34 || get(t, db, f, "a") != "by 34 again" {
			t.Fatal("a panicking function committed something")
		}
		if st := db.Stats(); st.InUse != 0 {
			t.Fatalf("a panicking function kept its connection: %+v", st)
		}
		if err := f.Do(ctx, "accounts", 42, nil); err != nil || highest(t, f, "accounts") != 42 {
			t.Fatalf("a nil function records the token: %v", err)
		}
		if err := f.Do(ctx, "other", 1, nil); err != nil || highest(t, f, "other") != 1 {
			t.Fatalf("resources are independent: %v", err)
		}
		if h := highest(t, f, "never-written"); h != 0 {
			t.Fatalf("Highest of a new resource: %v", h)
		}
		// The package-level shorthand.
		if err := fencesql.Do(ctx, db, "accounts", 41, nil); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("fencesql.Do: %v", err)
		}
	})
}

// TestBadInputChangesNothing: each bad input gets its typed error before
// any statement, and the database is left as it was.
func TestBadInputChangesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *sql.DB) {
		ctx := ctxT(t)
		f := newFence(t, db)
		ran := false
		fn := func(*sql.Tx) error { ran = true; return nil }
		cases := []struct {
			resource string
			token    fence.Token
			want     error
		}{
			{"r", 0, fence.ErrNoToken},
			{"r", 1 << 63, fencesql.ErrTokenRange},
			{"", 1, fencesql.ErrBadResource},
			{strings.Repeat("x", fencesql.MaxResourceLen+1), 1, fencesql.ErrBadResource},
			{"bad\xffutf8", 1, fencesql.ErrBadResource},
			{"nul\x00byte", 1, fencesql.ErrBadResource},
		}
		for _, c := range cases {
			if err := f.Do(ctx, c.resource, c.token, fn); !errors.Is(err, c.want) {
				t.Errorf("Do(%.20q, %v): %v, want %v", c.resource, c.token, err, c.want)
			}
		}
		if ran || count(t, db, "SELECT * FROM "+fencesql.DefaultTable) != 0 {
			t.Fatal("bad input ran the function or wrote a fence row")
		}
		if err := f.Do(ctx, strings.Repeat("é", fencesql.MaxResourceLen/2), 1, nil); err != nil {
			t.Fatalf("a name of exactly MaxResourceLen bytes: %v", err)
		}
		for _, name := range []string{"", "a b", "x;drop table t", "1abc", "a.b.c", `"q"`, strings.Repeat("t", 64)} {
			if _, err := fencesql.New(db, fencesql.WithTable(name)); !errors.Is(err, fencesql.ErrBadName) {
				t.Errorf("WithTable(%q): %v", name, err)
			}
		}
		if _, err := fencesql.New(db, fencesql.WithTable("app_1.Fence_2")); err != nil {
			t.Errorf("a schema-qualified name: %v", err)
		}
		if _, err := fencesql.New(db, fencesql.WithDialect("mysql")); !errors.Is(err, fencesql.ErrUnknownDriver) {
			t.Errorf("WithDialect(mysql): %v", err)
		}
		if _, err := fencesql.New(nil); !errors.Is(err, fencesql.ErrUnknownDriver) {
			t.Errorf("New(nil): %v", err)
		}
	})
}

// TestMissingTable: the first Do on a database without the fence table
// says so with the DDL; CreateTable makes it.
func TestMissingTable(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *sql.DB) {
		ctx := ctxT(t)
		f, err := fencesql.New(db)
		if err != nil {
			t.Fatal(err)
		}
		err = f.Do(ctx, "r", 1, func(*sql.Tx) error { t.Error("fn ran without a fence table"); return nil })
		var se *fencesql.SchemaError
		if !errors.Is(err, fencesql.ErrNoTable) || !errors.As(err, &se) || se.DDL != f.DDL() || !strings.Contains(err.Error(), "CREATE TABLE IF NOT EXISTS "+quoted(f.Dialect(), "zkrecipes_fence")) {
			t.Fatalf("Do without the table: %v", err)
		}
		t.Logf("%s: %v", f.Dialect(), err)
		if _, err := f.Highest(ctx, "r"); !errors.Is(err, fencesql.ErrNoTable) {
			t.Fatalf("Highest without the table: %v", err)
		}
		if err := fencesql.CreateTable(ctx, db); err != nil {
			t.Fatal(err)
		}
		if err := fencesql.CreateTable(ctx, db); err != nil {
			t.Fatalf("CreateTable is idempotent: %v", err)
		}
		if err := f.Do(ctx, "r", 1, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCancelledContextLeavesNothing: a context that ends in the middle of
// the transaction (after the function wrote, or while waiting for another
// holder's lock) commits nothing.
func TestCancelledContextLeavesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *sql.DB) {
		f := newFence(t, db)
		mustExec(t, db, "CREATE TABLE data (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
		if err := f.Do(ctxT(t), "r", 5, put(f, "a", "by 5", nil)); err != nil {
			t.Fatal(err)
		}

		// Cancelled after the function's write; the function returns nil.
		ctx, cancel := context.WithCancel(context.Background())
		err := f.Do(ctx, "r", 6, func(tx *sql.Tx) error {
			if err := put(f, "a", "by 6", nil)(tx); err != nil {
				return err
			}
			cancel()
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled after the write: %v", err)
		}
		if highest(t, f, "r") != 5 || get(t, db, f, "a") != "by 5" {
			t.Fatalf("a cancelled Do committed: highest %v, %q", highest(t, f, "r"), get(t, db, f, "a"))
		}

		// Cancelled while the function's statement runs.
		ctx, cancel = context.WithCancel(context.Background())
		err = f.Do(ctx, "r", 7, func(tx *sql.Tx) error {
			cancel()
			return put(f, "a", "by 7", nil)(tx)
		})
		if !errors.Is(err, context.Canceled) || highest(t, f, "r") != 5 || get(t, db, f, "a") != "by 5" {
			t.Fatalf("cancelled during the write: %v, highest %v, %q", err, highest(t, f, "r"), get(t, db, f, "a"))
		}

		// A deadline that passes while another holder has the fence row.
		holding, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- f.Do(context.Background(), "r", 10, func(tx *sql.Tx) error {
				close(holding)
				<-release
				return put(f, "a", "by 10", nil)(tx)
			})
		}()
		<-holding
		wctx, wcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err = f.Do(wctx, "r", 11, put(f, "a", "by 11", nil))
		wcancel()
		close(release)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiting past the deadline: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("the holder: %v", err)
		}
		if highest(t, f, "r") != 10 || get(t, db, f, "a") != "by 10" {
			t.Fatalf("after the timed-out waiter: highest %v, %q", highest(t, f, "r"), get(t, db, f, "a"))
		}
		if err := f.Do(ctxT(t), "r", 11, put(f, "a", "by 11", nil)); err != nil || get(t, db, f, "a") != "by 11" {
			t.Fatalf("the waiter again: %v", err)
		}
	})
}

// TestIsolationLevels checks the level Do's transactions run at: each
// database's default unless WithIsolation says otherwise (SQLite has one
// behaviour, serializable, whatever is asked).
func TestIsolationLevels(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		db := openPostgres(t)
		for _, c := range []struct {
			opts []fencesql.Option
			want string
		}{
			{nil, "read committed"},
			{[]fencesql.Option{fencesql.WithIsolation(sql.LevelRepeatableRead)}, "repeatable read"},
			{[]fencesql.Option{fencesql.WithIsolation(sql.LevelSerializable)}, "serializable"},
		} {
			f := newFence(t, db, c.opts...)
			var level string
			err := f.Do(ctxT(t), "r", 1, func(tx *sql.Tx) error {
				return tx.QueryRow("SHOW transaction_isolation").Scan(&level)
			})
			if err != nil || level != c.want {
				t.Errorf("isolation %q, want %q (%v)", level, c.want, err)
			}
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		db := openSQLite(t, "")
		f := newFence(t, db)
		var uncommitted int
		var timeout int64
		err := f.Do(ctxT(t), "r", 1, func(tx *sql.Tx) error {
			if err := tx.QueryRow("PRAGMA read_uncommitted").Scan(&uncommitted); err != nil {
				return err
			}
			return tx.QueryRow("PRAGMA busy_timeout").Scan(&timeout)
		})
		if err != nil || uncommitted != 0 || timeout != fencesql.DefaultBusyTimeout.Milliseconds() {
			t.Errorf("read_uncommitted %d, busy_timeout %d ms (%v)", uncommitted, timeout, err)
		}
		// A connection's own busy timeout is kept.
		db2 := openSQLite(t, "_pragma=busy_timeout(1234)")
		f2 := newFence(t, db2)
		err = f2.Do(ctxT(t), "r", 1, func(tx *sql.Tx) error { return tx.QueryRow("PRAGMA busy_timeout").Scan(&timeout) })
		if err != nil || timeout != 1234 {
			t.Errorf("busy_timeout %d, want the DSN's 1234 (%v)", timeout, err)
		}
	})
}

type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) { return nil, errors.New("no") }

func init() { sql.Register("fencesql-fake", fakeDriver{}) }

// TestDetect: the dialect comes from the driver's type, an unknown driver
// gets a typed error naming it, and WithDialect overrides detection.
func TestDetect(t *testing.T) {
	for _, c := range []struct {
		drv  driver.Driver
		want fencesql.Dialect
	}{
		{stdlib.GetDefaultDriver(), fencesql.Postgres},
		{&sqlite.Driver{}, fencesql.SQLite},
	} {
		db := sql.OpenDB(connector{c.drv})
		f, err := fencesql.New(db)
		if err != nil || f.Dialect() != c.want {
			t.Errorf("%T: %v, %v", c.drv, f, err)
		}
		db.Close()
	}
	db, err := sql.Open("fencesql-fake", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = fencesql.New(db)
	if !errors.Is(err, fencesql.ErrUnknownDriver) || !strings.Contains(err.Error(), "fakeDriver") || !strings.Contains(err.Error(), "WithDialect") {
		t.Fatalf("unknown driver: %v", err)
	}
	if err := fencesql.Do(context.Background(), db, "r", 1, nil); !errors.Is(err, fencesql.ErrUnknownDriver) {
		t.Fatalf("Do with an unknown driver: %v", err)
	}
	f, err := fencesql.New(db, fencesql.WithDialect(fencesql.Postgres))
	if err != nil || f.Dialect() != fencesql.Postgres || !strings.HasPrefix(f.DDL(), `CREATE TABLE IF NOT EXISTS "zkrecipes_fence" (resource pg_catalog.text PRIMARY KEY`) {
		t.Fatalf("WithDialect: %v, %v", f, err)
	}
}

type connector struct{ d driver.Driver }

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.d.Open("") }
func (c connector) Driver() driver.Driver                        { return c.d }

// TestNewRefusesWhatTheDatabaseLacks: an isolation level PostgreSQL does
// not have, and an explicit dialect that contradicts a known driver, are
// refused by New with a typed error, before any statement (instead of
// failing at the first Do with the database's own words).
func TestNewRefusesWhatTheDatabaseLacks(t *testing.T) {
	pg, lite := openPostgres(t), openSQLite(t, "")
	for _, l := range []sql.IsolationLevel{sql.LevelWriteCommitted, sql.LevelLinearizable, sql.LevelSnapshot} {
		_, err := fencesql.New(pg, fencesql.WithIsolation(l))
		if !errors.Is(err, fencesql.ErrIsolation) {
			t.Errorf("PostgreSQL, %v: %v", l, err)
		}
		t.Log(err)
	}
	for _, l := range []sql.IsolationLevel{sql.LevelReadUncommitted, sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable} {
		if _, err := fencesql.New(pg, fencesql.WithIsolation(l)); err != nil {
			t.Errorf("PostgreSQL, %v: %v", l, err)
		}
	}
	if err := fencesql.Do(ctxT(t), pg, "r", 1, nil, fencesql.WithDialect(fencesql.SQLite)); !errors.Is(err, fencesql.ErrDialectMismatch) {
		t.Errorf("SQLite's dialect on pgx: %v", err)
	} else {
		t.Log(err)
	}
	if _, err := fencesql.New(lite, fencesql.WithDialect(fencesql.Postgres)); !errors.Is(err, fencesql.ErrDialectMismatch) {
		t.Errorf("PostgreSQL's dialect on modernc.org/sqlite: %v", err)
	}
	if f, err := fencesql.New(lite, fencesql.WithDialect(fencesql.SQLite)); err != nil || f.Dialect() != fencesql.SQLite {
		t.Errorf("the matching dialect: %v", err)
	}
}

// TestDeadlockIsAConflict: under READ COMMITTED too, two Do calls whose
// functions lock rows in opposite orders deadlock; PostgreSQL aborts one
// (SQLSTATE 40P01), which gets ErrConflict with nothing committed, and the
// other commits.
func TestDeadlockIsAConflict(t *testing.T) {
	db := openPostgres(t)
	f := newFence(t, db)
	mustExec(t, db, "CREATE TABLE acct (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)", "INSERT INTO acct VALUES (1, 0), (2, 0)")
	ctx := ctxT(t)
	var locked sync.WaitGroup
	locked.Add(2)
	transfer := func(first, second int) func(tx *sql.Tx) error {
		return func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "UPDATE acct SET n = n + 1 WHERE id = $1", first); err != nil {
				locked.Done()
				return err
			}
			locked.Done()
			locked.Wait() // both hold their first row
			_, err := tx.ExecContext(ctx, "UPDATE acct SET n = n + 1 WHERE id = $1", second)
			return err
		}
	}
	errs := make(chan error, 2)
	go func() { errs <- f.Do(ctx, "a", 5, transfer(1, 2)) }()
	go func() { errs <- f.Do(ctx, "b", 5, transfer(2, 1)) }()
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("want one deadlock victim: %v, %v", e1, e2)
	}
	victim := errors.Join(e1, e2)
	if !errors.Is(victim, fencesql.ErrConflict) || !strings.Contains(victim.Error(), "40P01") {
		t.Fatalf("the victim's error: %v", victim)
	}
	t.Log(victim)
	if count(t, db, "SELECT * FROM acct WHERE n = 1") != 2 || count(t, db, "SELECT * FROM "+fencesql.DefaultTable) != 1 {
		t.Fatal("the victim committed something")
	}
}
