package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
)

// TestRaiseColumnFloor: on PostgreSQL and SQLite, RaiseColumnFloor raises
// the fence column of every row below the floor (NULL too) in one
// statement, after which Update refuses every token below the floor on
// each of them and accepts the new era's; a row above the floor keeps its
// fence; it is idempotent, quotes keyword names, and refuses what Update
// refuses.
func TestRaiseColumnFloor(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *sql.DB) {
		ctx := ctxT(t)
		f, err := fencesql.New(db)
		if err != nil {
			t.Fatal(err)
		}
		p := f.Dialect().Placeholder
		floor := fence.Era(1).Floor()
		above, _ := fence.Era(2).Token(5)
		mustExec(t, db, "CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT, fence BIGINT)",
			"INSERT INTO jobs (id, state, fence) VALUES (1, 'a', 40), (2, 'b', NULL), (3, 'c', 0)")
		mustExec(t, db, "INSERT INTO jobs (id, state, fence) VALUES (4, 'd', "+above.String()+")")
		job := func(id int) fencesql.Row { return fencesql.Row{Table: "jobs", Key: "id", ID: id} }
		if err := f.Update(ctx, db, 40, job(1), "state = "+p(1), "old"); err != nil {
			t.Fatal(err)
		}
		if n, err := f.RaiseColumnFloor(ctx, db, "jobs", "", floor); err != nil || n != 3 {
			t.Fatalf("RaiseColumnFloor = %d, %v; want 3 rows raised", n, err)
		}
		if n := count(t, db, "SELECT id FROM jobs WHERE fence = "+p(1), int64(floor)); n != 3 {
			t.Fatalf("%d rows at the floor, want 3", n)
		}
		if n := count(t, db, "SELECT id FROM jobs WHERE id = 4 AND fence = "+p(1), int64(above)); n != 1 {
			t.Fatal("the row above the floor was lowered")
		}
		for id := 1; id <= 3; id++ {
			var se *fence.StaleError
			err := f.Update(ctx, db, 40, job(id), "state = "+p(1), "OLD-ERA")
			if !errors.As(err, &se) || se.Highest != floor {
				t.Errorf("row %d: the old era's token 40 after the raise: %v", id, err)
			}
			first, _ := fence.Era(1).Token(1)
			if err := f.Update(ctx, db, first, job(id), "state = "+p(1), "new"); err != nil {
				t.Errorf("row %d: the new era's first token: %v", id, err)
			}
		}
		if n := count(t, db, "SELECT id FROM jobs WHERE state = 'OLD-ERA'"); n != 0 {
			t.Fatalf("%d rows written by the old era", n)
		}
		if n, err := fencesql.RaiseColumnFloor(ctx, db, "jobs", "fence", floor); err != nil || n != 0 {
			t.Fatalf("a second raise: %d, %v; want 0 rows", n, err)
		}
		// Keyword names are the table and column of that name.
		mustExec(t, db, `CREATE TABLE "user" (id INTEGER PRIMARY KEY, "order" BIGINT NOT NULL DEFAULT 0)`,
			`INSERT INTO "user" (id) VALUES (1)`)
		if n, err := f.RaiseColumnFloor(ctx, db, "user", "order", floor); err != nil || n != 1 {
			t.Fatalf(`"user"."order": %d, %v`, n, err)
		}
		checkRaiseColumnErrors(t, ctx, f, db)
	})
}

// checkRaiseColumnErrors: RaiseColumnFloor's refusals, the typed errors
// Update gives for the same input.
func checkRaiseColumnErrors(t *testing.T, ctx context.Context, f *fencesql.Fence, db *sql.DB) {
	t.Helper()
	floor := fence.Era(1).Floor()
	cases := []struct {
		table, column string
		floor         fence.Token
		want          []error
	}{
		{"jobs", "", 0, []error{fence.ErrNoToken}},
		{"jobs", "", fence.MaxToken + 1, []error{fencesql.ErrTokenRange, fence.ErrTokenOverflow}},
		{"jobs", "", 1<<64 - 1, []error{fencesql.ErrTokenRange, fence.ErrTokenOverflow}},
		{"jobs;", "", floor, []error{fencesql.ErrBadName}},
		{"jobs", "a b", floor, []error{fencesql.ErrBadName}},
		{"nosuch", "", floor, []error{fencesql.ErrNoTable}},
		{"jobs", "nofence", floor, []error{fencesql.ErrNoColumn}},
	}
	for _, c := range cases {
		_, err := f.RaiseColumnFloor(ctx, db, c.table, c.column, c.floor)
		for _, w := range c.want {
			if !errors.Is(err, w) {
				t.Errorf("RaiseColumnFloor(%q, %q, %v): %v, want %v", c.table, c.column, c.floor, err, w)
			}
		}
	}
	var se *fencesql.SchemaError
	if _, err := f.RaiseColumnFloor(ctx, db, "jobs", "nofence", floor); !errors.As(err, &se) || se.DDL == "" {
		t.Errorf("a missing fence column: %v; want a *SchemaError with the ALTER TABLE", err)
	}
}

// TestRaiseColumnFloorSQLiteBusy: on SQLite, RaiseColumnFloor on a *sql.DB
// opened without a busy timeout waits for another connection's write
// transaction (the Fence's busy timeout, as Update's) instead of failing
// at once with SQLITE_BUSY.
func TestRaiseColumnFloorSQLiteBusy(t *testing.T) {
	db := openSQLite(t, "")
	ctx := ctxT(t)
	mustExec(t, db, "CREATE TABLE jobs (id INTEGER PRIMARY KEY, fence BIGINT NOT NULL DEFAULT 0)",
		"INSERT INTO jobs (id) VALUES (1)")
	other, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	// Without a busy timeout (WithBusyTimeout(0)) it fails at once: the
	// wait below is the Fence's.
	if _, err := fencesql.RaiseColumnFloor(ctx, db, "jobs", "", 1, fencesql.WithBusyTimeout(0)); !errors.Is(err, fencesql.ErrConflict) {
		t.Fatalf("with no busy timeout: %v; want ErrConflict (SQLITE_BUSY)", err)
	}
	done := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, err := other.ExecContext(ctx, "COMMIT")
		done <- err
	}()
	n, err := fencesql.RaiseColumnFloor(ctx, db, "jobs", "", fence.Era(1).Floor())
	if cerr := <-done; cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil || n != 1 {
		t.Fatalf("RaiseColumnFloor while another connection writes: %d, %v; want 1 row after the wait", n, err)
	}
}
