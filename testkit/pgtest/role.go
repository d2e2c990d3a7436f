package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"testing"
)

// Role creates a login role for the test, with no privileges beyond
// PostgreSQL's defaults (not a superuser, no CREATEDB, no CREATEROLE) and
// no password (pgtest's servers trust loopback logins), and returns its
// name; the role is dropped at the test's cleanup, after the databases the
// test creates later (cleanups run last-in first-out), with what it owns
// in the maintenance database. Tests use it to act as a second, ordinary
// user: an attacker, or an application role.
func (s *Server) Role(tb testing.TB, prefix string) string {
	tb.Helper()
	name := fmt.Sprintf("%s_%d_%d", sanitize(prefix), os.Getpid(), dbSeq.Add(1)) // one sequence with the databases'
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	db, err := sql.Open("pgx", s.admin)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE ROLE "+name+" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE"); err != nil {
		tb.Fatalf("pgtest: create role %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		defer cancel()
		db, err := sql.Open("pgx", s.admin)
		if err != nil {
			tb.Errorf("pgtest: %v", err)
			return
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, "DROP OWNED BY "+name+"; DROP ROLE IF EXISTS "+name); err != nil {
			tb.Errorf("pgtest: drop role %s: %v", name, err)
		}
	})
	return name
}

// AsRole returns dsn (a postgres:// URL, such as Database returns) with its
// user replaced by role and no password.
func AsRole(dsn, role string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("pgtest: AsRole needs a postgres:// URL")
	}
	u.User = url.User(role)
	return u.String(), nil
}
