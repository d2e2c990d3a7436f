package main

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// TestPgServerAnswers (issue 37 item 7): a PostgreSQL URL naming a
// database the server does not have, or with a misspelled parameter
// (sslmod=), is a usage error (64) that names it, with the default
// sslmode (prefer: pgx tries TLS first) against a server without TLS; it
// was 69 "server unreachable" with a hint about the server's ssl setting,
// and 70 "needs PostgreSQL 14 or later".
func TestPgServerAnswers(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.Shared(t).Database(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("sslmode")
	u.RawQuery = q.Encode()
	noDB := *u
	noDB.Path = "/no_such_database_zkr"
	q.Set("sslmod", "disable")
	u.RawQuery = q.Encode()
	dir := t.TempDir()
	for _, c := range []struct{ servers, says string }{
		{noDB.String(), "names a database the server does not have"},
		{u.String(), `sets \"sslmod\"`},
	} {
		p := startOn(t, c.servers, dir, "lock", "/pg/answers", "--", "true")
		p.expect(exitUsage, 60*time.Second)
		out := p.stderr.String()
		if !strings.Contains(out, c.says) || strings.Contains(out, "ssl setting") || strings.Contains(out, "14 or later") {
			t.Errorf("%s: want a usage error saying %q, without a TLS hint or a version:\n%s", c.servers, c.says, out)
		}
	}
}
