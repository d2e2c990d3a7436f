package etcdlock_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/connerrtest"
)

// connectCase is one row of docs/backends.md's "Errors at connect".
type connectCase = connerrtest.Case

// checkCase runs c and checks its error.
var checkCase = connerrtest.Check

// TestConnectErrors: every way Connect (or the first acquisition) fails
// matches the sentinel docs/backends.md's table gives for it, the same on
// every backend: a refused client certificate or a role without rights is
// recipe.ErrNoPermission; a server not reached (nothing listens, a name
// that does not resolve, a certificate not trusted, TLS against a plain
// endpoint or the reverse) is recipe.ErrUnreachable, at once; a TLS
// configuration that allows no version is recipe.ErrBadOption, at once.
func TestConnectErrors(t *testing.T) {
	srv := etcdtest.SharedTLS(t)
	plain := etcdtest.Shared(t)
	url := srv.URL(etcdtest.Prefix(t, srv))
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
	connect := func(url string, opts ...etcdlock.Option) func(t *testing.T) error {
		return func(t *testing.T) error { _, err := tlsConnect(t, url, opts...); return err }
	}
	for _, c := range []connectCase{
		{Name: "server certificate not trusted", Run: connect(url, etcdlock.WithTLS(wrongCA)), Unreach: true, Cert: true, Says: "failed verification", Within: 3 * time.Second},
		{Name: "no client certificate", Run: connect(url, etcdlock.WithTLS(&tls.Config{RootCAs: good.RootCAs})), Perm: true, Unreach: true, Says: "refused the client certificate (none was presented)", Within: 3 * time.Second},
		{Name: "MaxVersion TLS 1.1", Run: connect(url, etcdlock.WithTLS(tls11)), Bad: true, Says: "MaxVersion", Within: time.Second},
		{Name: "plaintext to a TLS endpoint", Run: connect("etcd://" + srv.Endpoints()[0] + "/x"), Unreach: true, Says: "use etcds:// or WithTLS", Within: 3 * time.Second},
		{Name: "TLS to a plaintext endpoint", Run: connect(plain.URL("/x"), etcdlock.WithTLS(good)), Unreach: true, Says: "is it a TLS client URL", Within: 3 * time.Second},
		{Name: "nothing listens", Run: connect("etcd://127.0.0.1:1/x"), Unreach: true, Says: "connection refused", Within: 3 * time.Second},
		{Name: "a name that does not resolve", Run: connect("etcd://no-such-host.invalid:2379/x"), Unreach: true, Says: "no-such-host.invalid"},
		{Name: "a role without rights", Run: func(t *testing.T) error { return deniedAcquire(t) }, Perm: true, Says: "permission denied"},
	} {
		checkCase(t, c)
	}
}

// noPassword makes a user that logs in by client certificate only.
var noPassword = &clientv3.UserAddOptions{NoPassword: true}

// deniedAcquire enables authentication on a server of its own, where the
// client certificate's common name is a user whose role has no key range,
// and returns the error of an acquisition as that user.
func deniedAcquire(t *testing.T) error {
	srv, err := etcdtest.LaunchTLS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cli := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", "root-pw-etcd"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "nothing"); return err },
		func() error { _, err := cli.UserAddWithOptions(ctx, certtest.ClientName, "", noPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, certtest.ClientName, "nothing"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("setting up authentication: %v", err)
		}
	}
	s, err := etcdlock.Connect(ctx, srv.URL("/denied"), etcdlock.WithTLS(srv.ClientTLS()), etcdlock.WithTTL(testTTL), etcdlock.WithLogger(quiet))
	if err != nil {
		return err
	}
	defer s.Close()
	m, err := etcdlock.New(s, "l")
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Acquire(ctx)
	return err
}
