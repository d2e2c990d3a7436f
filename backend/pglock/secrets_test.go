package pglock

import (
	"github.com/zkrecipes/zkrecipes/testkit/rtest/connerrtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/secrettest"

	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// The test passwords: `make test` fails if its output holds "s3cr3t-zkr-"
// anywhere (Makefile), so a password that leaks into an error or a log line
// shows up there even when the test that leaked it printed nothing.
const (
	pgRolePW  = "s3cr3t-zkr-pglock-role"        // the role's password on the server
	pgWrongPW = "s3cr3t-zkr-pglock wrong\\' pw" // given instead: a space and an escaped quote
	pwMark    = secrettest.Mark
)

// noSecret fails the test if text holds a test password or a part of one,
// naming what without printing it.
func noSecret(t *testing.T, what, text string) {
	t.Helper()
	secrettest.Absent(t, what, text, "pglock-role", "pglock wrong", "wrong\\'", "wrong'")
}

// noSecretErr fails the test if err, an error it wraps, or a value a struct
// walker reaches from them holds the test password or a part of it
// (secrettest.AbsentErr), naming what without printing it.
func noSecretErr(t *testing.T, what string, err error) {
	t.Helper()
	secrettest.AbsentErr(t, what, err, "pglock-role", "pglock wrong", "wrong\\'", "wrong'")
}

// TestBadURLHidesPassword: a connection string pgx cannot parse is
// ErrBadURL, and neither the error nor pgx's error it wraps shows a
// password given in any of the ways pgx reads one (pgx's own redaction
// missed the spaced, escaped and unterminated ones).
func TestBadURLHidesPassword(t *testing.T) {
	pw := "s3cr3t-zkr-pglock"
	t.Setenv("PGPASSWORD", pw+"-env")
	for _, raw := range []string{
		"postgres://u:" + pw + "@h:notaport/db",
		"postgres://u:" + url.PathEscape(pw+"/x") + "@h/db?sslmode=bogus",
		"postgres://u@h/db?password=" + pw + "&sslmode=bogus",
		"postgres://u@h/db?sslpassword=" + pw + "&connect_timeout=zz",
		"host=h password=" + pw + " sslmode=bogus",
		"host=h password = 'x " + pw + "' sslmode=bogus",
		`host=h password='x\' ` + pw + `' sslmode=bogus`,
		"host=h password='x " + pw,
		"host=h port=x", // the password comes from PGPASSWORD
	} {
		_, err := Connect(context.Background(), raw)
		if !errors.Is(err, ErrBadURL) {
			t.Errorf("Connect(%s) = %v, want ErrBadURL", strings.ReplaceAll(raw, pw, "PW"), err)
			continue
		}
		noSecretErr(t, "Connect's error", err)
		var pe *pgconn.ParseConfigError
		if errors.As(err, &pe) {
			noSecret(t, "ParseConfigError.ConnString", pe.ConnString)
		}
	}
}

// TestWrongPasswordHidden: against a server that asks for a password, a
// wrong one given in each way pgx takes one (URL user information, URL
// query, keyword/value string, PGPASSWORD, the password file) fails with
// the server's refusal, and neither the error nor the log shows it. The
// right one then also never shows, in Connect's error or in Acquire's
// when the role's password changes under a live session.
func TestWrongPasswordHidden(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.Database(t)
	roleURL := srv.PasswordRole(t, dsn, pgRolePW)
	u, err := url.Parse(roleURL)
	if err != nil {
		t.Fatal(err)
	}
	role, db := u.User.Username(), strings.TrimPrefix(u.Path, "/")
	kv := fmt.Sprintf("host=%s port=%s dbname=%s user=%s sslmode=disable", u.Hostname(), u.Port(), db, role)
	withPW := func(pw string) string {
		v := *u
		v.User = url.UserPassword(role, pw)
		return v.String()
	}
	pgpass := filepath.Join(t.TempDir(), "pgpass")
	line := fmt.Sprintf("%s:%s:%s:%s:%s\n", u.Hostname(), u.Port(), db, role, strings.ReplaceAll(pgWrongPW, `\`, `\\`))
	if err := os.WriteFile(pgpass, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	wrong := strings.ReplaceAll(pgWrongPW, `\'`, `'`) // the password itself
	q := url.Values{"password": {wrong}}
	for _, c := range []struct{ name, raw, env, file string }{
		{"URL user information", withPW(wrong), "", ""},
		{"URL query", roleURL + "&" + q.Encode(), "", ""},
		{"keyword/value", kv + " password = '" + pgWrongPW + "'", "", ""},
		{"PGPASSWORD", roleURL, wrong, ""},
		{"password file", roleURL, "", pgpass},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("PGPASSWORD", c.env)
			t.Setenv("PGPASSFILE", c.file)
			var logs bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := Connect(ctx, c.raw, WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
			if err == nil {
				s.Close()
				t.Fatal("Connect with a wrong password succeeded")
			}
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "28P01" {
				t.Errorf("Connect: %s; want the server's invalid_password (28P01)", strings.ReplaceAll(err.Error(), wrong, "PW"))
			}
			noSecretErr(t, "Connect's error", err)
			noSecret(t, "the log", logs.String())
		})
	}
	t.Run("password changed under a session", func(t *testing.T) {
		acquireAfterPasswordChange(t, dsn, role, withPW(pgRolePW))
	})
}

// acquireAfterPasswordChange connects as role (which may then create its
// token table), changes role's password, and checks that the refused dial
// of the next Acquire does not show the password the session holds.
func acquireAfterPasswordChange(t *testing.T, adminDSN, role, roleDSN string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := pgconn.Connect(ctx, adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer hangUp(adm)
	admin := func(sql string) {
		if _, err := adm.Exec(ctx, sql).ReadAll(); err != nil {
			t.Fatalf("%s: %v", strings.Fields(sql)[0], err)
		}
	}
	admin("GRANT CREATE ON SCHEMA public TO " + role)
	var logs bytes.Buffer
	s, err := Connect(ctx, roleDSN, WithTTL(testTTL), WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		noSecretErr(t, "Connect's error", err)
		t.Fatalf("Connect with the right password: %s", strings.ReplaceAll(err.Error(), pgRolePW, "PW"))
	}
	defer s.Close()
	admin("ALTER ROLE " + role + " PASSWORD 'changed-by-the-test'")
	m, err := New(s, "secrets")
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(ctx)
	if err == nil {
		l.Release(ctx)
		t.Fatal("Acquire after the password changed succeeded")
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28P01" {
		t.Errorf("Acquire: %s; want the server's invalid_password (28P01)", strings.ReplaceAll(err.Error(), pgRolePW, "PW"))
	}
	noSecretErr(t, "Acquire's error", err)
	noSecret(t, "the log", logs.String())
	admin("DROP TABLE IF EXISTS " + DefaultTable)
}

// TestUnreachableHidesPassword: a Connect that fails before any password is
// asked for (another protocol's server, nothing listening, a port that
// never answers) keeps the URL's password nowhere in its error: not in its
// text, not in the errors it wraps, not in their fields.
func TestUnreachableHidesPassword(t *testing.T) {
	t.Parallel()
	pw := pwMark + "-pglock-unreach"
	for name, addr := range unreachable(t) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := Connect(ctx, "postgres://app:"+pw+"@"+addr+"/app?sslmode=disable")
		cancel()
		if err == nil {
			s.Close()
			t.Fatalf("%s: Connect succeeded", name)
		}
		secrettest.AbsentErr(t, name+": Connect's error", err, "pglock-unreach")
	}
}

// unreachable returns addresses where no PostgreSQL server answers: an HTTP
// server, a closed port, a server that never says a word.
func unreachable(t *testing.T) map[string]string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	return map[string]string{
		"a wrong server":    connerrtest.HTTPServer(t),
		"nothing listening": closed,
		"a silent port":     connerrtest.BannerServer(t, ""),
	}
}
