package fencesql_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/resource/fencesql"
)

// sqliteFenceDDL creates a fence table as fencesql's DDL does, in schema.
func sqliteFenceDDL(schema string) string {
	return "CREATE TABLE " + schema + "zkrecipes_fence (resource TEXT PRIMARY KEY NOT NULL, token INTEGER NOT NULL CHECK (token > 0))"
}

// attackSQLite runs the sequence of finding 1 with f: CreateTable (if
// create), Do with token 10, lower (the attacker's write, if any), Do with
// token 5; each must be refused with ErrUntrustedTable naming the table,
// and fn never run.
func attackSQLite(t *testing.T, f *fencesql.Fence, create bool, lower func()) {
	t.Helper()
	ctx := ctxT(t)
	var errs []error
	if create {
		errs = append(errs, f.CreateTable(ctx))
	}
	errs = append(errs, f.Do(ctx, "r", 10, nil))
	if lower != nil {
		lower()
	}
	ran := false
	errs = append(errs, f.Do(ctx, "r", 5, func(*sql.Tx) error { ran = true; return nil }))
	if ran {
		t.Error("fn ran with token 5 after token 10: the fence table accepted a lower token")
	}
	for _, err := range errs {
		if !errors.Is(err, fencesql.ErrUntrustedTable) || !strings.Contains(err.Error(), "zkrecipes_fence") {
			t.Errorf("want ErrUntrustedTable naming the table, got %v", err)
		}
	}
	t.Log(errs[len(errs)-1])
}

// oneConn opens a SQLite file on one connection, so that what a
// connection has (ATTACH, temp tables) is what every call sees.
func oneConn(t *testing.T) (*sql.DB, string) {
	t.Helper()
	db := openSQLite(t, "")
	db.SetMaxOpenConns(1)
	var dir string
	if err := db.QueryRow("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&dir); err != nil {
		t.Fatal(err)
	}
	return db, filepath.Dir(dir)
}

// TestUntrustedFenceTableSQLite: what SQLite lets fencesql see of a fence
// table someone else shaped is refused: triggers, a view, a bare name that
// resolves to an attached database or a temp table (files others can
// write: TestSQLiteFileModes). On main, the trigger and the attached database made Do accept
// token 5 after 10.
func TestUntrustedFenceTableSQLite(t *testing.T) {
	t.Run("trigger", func(t *testing.T) {
		db := openSQLite(t, "")
		mustExec(t, db, sqliteFenceDDL(""),
			"CREATE TRIGGER lower_token AFTER INSERT ON zkrecipes_fence BEGIN UPDATE zkrecipes_fence SET token = 1 WHERE resource = NEW.resource; END",
			"CREATE TRIGGER lower_again AFTER UPDATE ON zkrecipes_fence BEGIN UPDATE zkrecipes_fence SET token = 1 WHERE resource = NEW.resource; END")
		attackSQLite(t, newUnchecked(t, db), true, nil)
	})
	t.Run("view", func(t *testing.T) {
		db := openSQLite(t, "")
		mustExec(t, db, "CREATE TABLE real_fence (resource TEXT PRIMARY KEY, token INTEGER)",
			"CREATE VIEW zkrecipes_fence AS SELECT resource, token FROM real_fence")
		attackSQLite(t, newUnchecked(t, db), true, nil)
	})
	t.Run("attached database", func(t *testing.T) {
		db, dir := oneConn(t)
		other := filepath.Join(dir, "other.db")
		mustExec(t, db, "ATTACH DATABASE '"+other+"' AS other", sqliteFenceDDL("other."))
		attackSQLite(t, newUnchecked(t, db), false, func() {
			odb, err := sql.Open("sqlite", other)
			if err != nil {
				t.Fatal(err)
			}
			defer odb.Close()
			mustExec(t, odb, "UPDATE zkrecipes_fence SET token = 1")
		})
	})
	t.Run("temp table", func(t *testing.T) {
		db, _ := oneConn(t)
		mustExec(t, db, sqliteFenceDDL(""), "CREATE TEMP TABLE zkrecipes_fence (resource TEXT PRIMARY KEY NOT NULL, token INTEGER NOT NULL)")
		attackSQLite(t, newUnchecked(t, db), true, nil)
	})
}

// TestSQLiteQualifiedTable: a schema-qualified name is the table of that
// schema (an attached database), checked like main's.
func TestSQLiteQualifiedTable(t *testing.T) {
	db, dir := oneConn(t)
	mustExec(t, db, "ATTACH DATABASE '"+filepath.Join(dir, "aux.db")+"' AS aux")
	f := newFence(t, db, fencesql.WithTable("aux.zkrecipes_fence"))
	ctx := ctxT(t)
	if err := f.Do(ctx, "r", 7, nil); err != nil {
		t.Fatal(err)
	}
	if count(t, db, "SELECT * FROM aux.zkrecipes_fence WHERE token = 7") != 1 {
		t.Fatal("WithTable(aux.zkrecipes_fence) wrote elsewhere")
	}
	if err := fencesql.Do(ctx, db, "r", 7, nil, fencesql.WithTable("temp.zkrecipes_fence")); err != nil && !errors.Is(err, fencesql.ErrNoTable) {
		t.Fatalf("temp.zkrecipes_fence missing: %v", err)
	}
	mustExec(t, db, "CREATE TEMP TABLE zkrecipes_fence (resource TEXT PRIMARY KEY NOT NULL, token INTEGER NOT NULL)")
	if err := fencesql.Do(ctx, db, "r", 7, nil, fencesql.WithTable("temp.zkrecipes_fence")); !errors.Is(err, fencesql.ErrUntrustedTable) {
		t.Fatalf("a temp fence table: %v", err)
	}
}

// newUnchecked is a new Fence on db, which checks its table at first use.
func newUnchecked(t *testing.T, db *sql.DB) *fencesql.Fence {
	t.Helper()
	f, err := fencesql.New(db)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
