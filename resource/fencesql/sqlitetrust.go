package fencesql

import (
	"context"
	"fmt"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/pgtrust"
)

// SQLite has no roles: whoever can write the database file (or its
// directory, where the -journal and -wal files are made) can change any
// row, and no check inside the database stops them. trustSQLite refuses
// what is cheap to see: a fence "table" that is a view or has triggers
// (either can change or drop a write), a bare name that resolves to a
// schema other than main (a temp table or an attached database standing
// in for it), a temp schema (its rows end with the connection), and files
// that others can write (checkFiles).

// trustSQLite checks the fence table of a SQLite database and returns its
// quoted, schema-qualified name and whether it exists.
func (f *Fence) trustSQLite(ctx context.Context, q pgtrust.Queryer) (string, bool, error) {
	dbs, err := queryStrings(ctx, q, "SELECT name, file FROM pragma_database_list ORDER BY seq")
	if err != nil {
		return "", false, err
	}
	schema, name, qualified := strings.Cut(f.table, ".")
	if !qualified {
		schema, name = "main", f.table
	}
	// The order SQLite resolves a bare name in: temp, main, then the
	// attached databases in their order (seq 1 is temp, 0 main).
	if len(dbs) > 1 {
		dbs[0], dbs[1] = dbs[1], dbs[0]
	}
	if qualified {
		dbs = matching(dbs, schema)
	}
	qname := f.d.quotePart(schema) + "." + f.d.quotePart(name)
	untrusted := func(format string, args ...any) (string, bool, error) {
		return "", false, &pgtrust.Error{Table: qname, Reason: fmt.Sprintf(format, args...)}
	}
	for _, db := range dbs {
		rows, err := queryStrings(ctx, q, "SELECT type FROM "+f.d.quotePart(db[0])+".sqlite_master WHERE type IN ('table', 'view') AND name = ?1 COLLATE NOCASE", name)
		if err != nil {
			return "", false, err
		}
		if len(rows) == 0 {
			continue
		}
		switch {
		case !strings.EqualFold(db[0], schema):
			qname = f.d.quotePart(db[0]) + "." + f.d.quotePart(name)
			return untrusted("the bare name %q resolves to it (a temp table or an attached database), not to a table of main: name the schema (schema.table)", name)
		case strings.EqualFold(schema, "temp"):
			return untrusted("it is a temporary table: its rows end with the connection")
		case rows[0][0] != "table":
			return untrusted("it is a %s, not a table", rows[0][0])
		}
		if err := f.sqliteTriggers(ctx, q, db[0], name); err != nil {
			return untrusted("%v", err)
		}
		if err := checkFiles(db[1]); err != nil {
			return untrusted("%v", err)
		}
		return qname, true, nil
	}
	return qname, false, nil
}

// matching returns the databases of dbs named schema (SQLite's schema
// names ignore ASCII case).
func matching(dbs [][]string, schema string) [][]string {
	var out [][]string
	for _, db := range dbs {
		if strings.EqualFold(db[0], schema) {
			out = append(out, db)
		}
	}
	return out
}

// sqliteTriggers refuses triggers on the table, in its schema or in temp
// (a temp trigger may be on a table of main).
func (f *Fence) sqliteTriggers(ctx context.Context, q pgtrust.Queryer, schema, name string) error {
	for _, s := range []string{schema, "temp"} {
		rows, err := queryStrings(ctx, q, "SELECT name FROM "+f.d.quotePart(s)+".sqlite_master WHERE type = 'trigger' AND tbl_name = ?1 COLLATE NOCASE", name)
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			return fmt.Errorf("it has trigger %q (in schema %s), which could change writes", rows[0][0], s)
		}
	}
	return nil
}
