package pglock

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// TestConnectServerAnswers: a server's answer to the startup message is
// classified by its SQLSTATE, with or without sslmode=prefer's TLS attempt
// before it (the default, against a server without TLS): a database the
// server does not have (3D000) and a misspelled query parameter (42704,
// "sslmod", which pgx sends as a server setting) are recipe.ErrBadOption,
// naming what is wrong, not recipe.ErrUnreachable with a TLS hint nor
// "needs PostgreSQL 14 or later"; the refused TLS attempt is not in the
// text; the *pgconn.PgError stays in the chain.
func TestConnectServerAnswers(t *testing.T) {
	t.Parallel()
	ps := pgtest.Shared(t)
	dsn := ps.Database(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/no_such_database_zkr"
	noDB := u.String()
	for _, c := range []struct {
		name, dsn, code, says string
	}{
		{"no such database, sslmode=prefer", withQuery(t, noDB, "sslmode", ""), "3D000", "names a database the server does not have"},
		{"no such database, sslmode=disable", withQuery(t, noDB, "sslmode", "disable"), "3D000", "names a database the server does not have"},
		{"misspelled sslmode, sslmode=prefer", withQuery(t, dsn, "sslmode", "", "sslmod", "disable"), "42704", `sets "sslmod"`},
		{"misspelled parameter, sslmode=disable", withQuery(t, dsn, "sslmode", "disable", "connect_timout", "5"), "42704", `sets "connect_timout"`},
	} {
		err := tlsConnect(c.dsn)
		var pe *pgconn.PgError
		switch {
		case !errors.Is(err, recipe.ErrBadOption) || errors.Is(err, recipe.ErrUnreachable) || errors.Is(err, ErrOldServer):
			t.Errorf("%s: want recipe.ErrBadOption only: %v", c.name, err)
		case !errors.As(err, &pe) || pe.Code != c.code:
			t.Errorf("%s: want SQLSTATE %s in the chain: %v", c.name, c.code, err)
		case !strings.Contains(err.Error(), c.says):
			t.Errorf("%s: the error does not say %q: %v", c.name, c.says, err)
		}
		for _, no := range []string{"TLS", "ssl setting", "14 or later"} {
			if err != nil && strings.Contains(err.Error(), no) {
				t.Errorf("%s: the error says %q: %v", c.name, no, err)
			}
		}
		t.Logf("%s: %v", c.name, err)
	}
}

// TestClassifyAnswer: the SQLSTATE classes classifyAnswer gives a type
// that no server of the tests can answer with (PostgreSQL 13 refusing a
// session parameter of pglock's, a server shutting down).
func TestClassifyAnswer(t *testing.T) {
	params := map[string]string{"idle_session_timeout": "10000"}
	for _, c := range []struct {
		code, msg string
		want      error
	}{
		{"42704", `unrecognized configuration parameter "idle_session_timeout"`, ErrOldServer},
		{"42704", `unrecognized configuration parameter "sslmod"`, recipe.ErrBadOption},
		{"57P03", "the database system is starting up", recipe.ErrUnreachable},
		{"08P01", "invalid startup packet layout", recipe.ErrUnreachable},
		{"28P01", "password authentication failed", recipe.ErrNoPermission},
		{"3D000", `database "x" does not exist`, recipe.ErrBadOption},
	} {
		pe := &pgconn.PgError{Severity: "FATAL", Code: c.code, Message: c.msg}
		if err := classifyAnswer(pe, pe, params); !errors.Is(err, c.want) || !errors.Is(err, pe) {
			t.Errorf("%s %s: %v, want %v", c.code, c.msg, err, c.want)
		}
	}
}
