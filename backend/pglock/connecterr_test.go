package pglock

import (
	"context"
	"crypto/tls"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/connerrtest"
)

// connectCase is one row of docs/backends.md's "Errors at connect".
type connectCase = connerrtest.Case

// checkCase runs c and checks its error.
var checkCase = connerrtest.Check

// TestConnectErrors: every way Connect (or an acquisition's connection)
// fails matches the sentinel docs/backends.md's table gives for it, the
// same on every backend: a wrong or missing password, an unknown role, a
// missing client certificate and no TLS where pg_hba.conf wants it are
// recipe.ErrNoPermission (SQLSTATE 28P01, 28000); a server not reached
// (nothing listens, a name that does not resolve, a certificate not
// trusted, TLS against a server without it) is recipe.ErrUnreachable; a
// TLS configuration that allows no version is recipe.ErrBadOption, at once.
// The driver's errors stay in the chain (*pgconn.PgError and its code).
func TestConnectErrors(t *testing.T) {
	t.Parallel()
	srv := pgtest.SharedTLS(t)
	dsn := srv.Database(t)
	good := srv.ClientTLS()
	other, err := certtest.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wrongCA, err := other.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	tls11 := good.Clone()
	tls11.MaxVersion = tls.VersionTLS11
	// A client certificate of another authority with the server's
	// authority's name (certtest.CAName): OpenSSL finds the authority by
	// name, fails the signature and sends decrypt_error.
	sameName := &tls.Config{RootCAs: good.RootCAs, Certificates: wrongCA.Certificates}
	sameName12 := sameName.Clone()
	sameName12.MaxVersion = tls.VersionTLS12
	ps := pgtest.Shared(t)
	plain := ps.Database(t)
	role, err := url.Parse(ps.PasswordRole(t, plain, "errtypes-right-pw"))
	if err != nil {
		t.Fatal(err)
	}
	as := func(user *url.Userinfo) string { u := *role; u.User = user; return u.String() }
	connect := func(dsn string, opts ...Option) func(t *testing.T) error {
		return func(t *testing.T) error { return tlsConnect(dsn, opts...) }
	}
	state := func(code string, run func(t *testing.T) error) func(t *testing.T) error {
		return func(t *testing.T) error {
			err := run(t)
			if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != code {
				t.Errorf("want SQLSTATE %s in the chain: %v", code, err)
			}
			return err
		}
	}
	for _, c := range []connectCase{
		{Name: "server certificate not trusted", Run: connect(dsn, WithTLS(wrongCA)), Unreach: true, Cert: true, Says: "certificate signed by unknown authority", Within: 3 * time.Second},
		{Name: "no client certificate", Run: state("28000", connect(dsn, WithTLS(&tls.Config{RootCAs: good.RootCAs}))), Perm: true, Says: "certificate", Within: 3 * time.Second},
		// Over TLS 1.3 the client's handshake ends before the server checks
		// the certificate: pgx's startup message may then meet the reset
		// that follows the server's alert instead of the alert (one run in
		// a few under load), so only TLS 1.2, where the alert ends the
		// handshake itself, gives a certain answer.
		{Name: "client certificate of another CA of the same name, TLS 1.2", Run: connect(dsn, WithTLS(sameName12)), Perm: true, Says: "error decrypting message", Within: 3 * time.Second},
		{Name: "MaxVersion TLS 1.1", Run: connect(dsn, WithTLS(tls11)), Bad: true, Says: "MaxVersion", Within: time.Second},
		{Name: "plaintext where only TLS is let in", Run: state("28000", connect(withQuery(t, dsn, "sslmode", "disable"))), Perm: true, Says: "no encryption", Within: 3 * time.Second},
		{Name: "TLS to a server without TLS", Run: connect(plain, WithTLS(good)), Unreach: true, Says: "is its ssl setting on?", Within: 3 * time.Second},
		{Name: "nothing listens", Run: connect("postgres://u@127.0.0.1:1/db?connect_timeout=5"), Unreach: true, Says: "connection refused", Within: 3 * time.Second},
		{Name: "a name that does not resolve", Run: connect("postgres://u@no-such-host.invalid:5432/db?connect_timeout=5"), Unreach: true, Says: "no-such-host.invalid"},
		{Name: "wrong password", Run: state("28P01", connect(as(url.UserPassword(role.User.Username(), "wrong-pw")))), Perm: true, Says: "password authentication failed", Prefix: connerrtest.RefusedWords, Within: 3 * time.Second},
		{Name: "no password", Run: state("28P01", connect(as(url.User(role.User.Username())))), Perm: true, Says: "password authentication failed", Prefix: connerrtest.RefusedWords, Within: 3 * time.Second},
		{Name: "unknown role", Run: state("28000", connect(as(url.UserPassword("no_such_role_errtypes", "wrong-pw")))), Perm: true, Says: "does not exist", Prefix: connerrtest.RefusedWords, Within: 3 * time.Second},
		{Name: "password changed before an acquisition", Run: func(t *testing.T) error { return changedPassword(t, ps, plain) }, Perm: true, Says: "password authentication failed"},
	} {
		checkCase(t, c)
	}
}

// changedPassword connects as a password role, changes its password and
// returns the error of an acquisition (which opens a connection of its
// own).
func changedPassword(t *testing.T, ps *pgtest.Server, dsn string) error {
	roleURL := ps.PasswordRole(t, dsn, "errtypes-first-pw")
	u, err := url.Parse(roleURL)
	if err != nil {
		t.Fatal(err)
	}
	name := u.User.Username()
	u.User = url.UserPassword(name, "errtypes-first-pw")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer hangUp(adm)
	exec := func(sql string) {
		if _, err := adm.Exec(ctx, sql).ReadAll(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("GRANT CREATE ON SCHEMA public TO " + name) // the role makes the token table (dropped with what it owns)
	s, err := Connect(ctx, u.String(), WithTTL(testTTL))
	if err != nil {
		t.Fatalf("Connect with the right password: %v", err)
	}
	defer s.Close()
	exec("ALTER ROLE " + name + " PASSWORD 'errtypes-changed-pw'")
	m, err := New(s, "changed")
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(ctx)
	if err == nil {
		l.Release(ctx)
	}
	return err
}
