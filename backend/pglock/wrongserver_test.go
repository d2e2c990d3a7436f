package pglock

import (
	"context"
	"net/url"
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/connerrtest"
)

// TestConnectWrongServer (issue 24): a server of another protocol at the
// DSN's host and port (a real net/http server, one that greets like SSH)
// fails Connect within connerrtest.WrongWithin, matching
// recipe.ErrWrongServer and recipe.ErrUnreachable and naming what
// answered, never the DSN's password; before, pgx waited for the connect
// timeout (10 s) against the HTTP server, and against the SSH one failed
// at once saying only that the TLS handshake failed. The right server
// still connects.
// It runs serially, before the parallel tests: it bounds how long Connect
// takes to fail.
func TestConnectWrongServer(t *testing.T) {
	ctx := context.Background()
	const password = "s3cr3t-zkr-wrongserver"
	connerrtest.CheckWrongServers(t, "a PostgreSQL", password, func(hostport string) error {
		s, err := Connect(ctx, "postgres://someone:"+password+"@"+hostport+"/db?connect_timeout=10")
		if err == nil {
			s.Close()
		}
		return err
	})

	u, err := url.Parse(pgtest.Shared(t).Database(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Connect(ctx, u.String())
	if err != nil {
		t.Fatalf("the right server: %v", err)
	}
	s.Close()
}
