package etcdlock_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/internal/certtest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// connectCase is one row of docs/backends.md's "Errors at connect": what
// the error must match (perm: recipe.ErrNoPermission, unreach:
// recipe.ErrUnreachable, cert: a *tls.CertificateVerificationError for
// errors.As, bad: recipe.ErrBadOption), what its text must say, and how
// soon it must come (0: no bound).
type connectCase struct {
	name                     string
	run                      func(t *testing.T) error
	perm, unreach, cert, bad bool
	says                     string
	within                   time.Duration
}

// checkCase runs c and checks its error.
func checkCase(t *testing.T, c connectCase) {
	t.Helper()
	start := time.Now()
	err := c.run(t)
	took := time.Since(start)
	var ve *tls.CertificateVerificationError
	got := [4]bool{errors.Is(err, recipe.ErrNoPermission), errors.Is(err, recipe.ErrUnreachable), errors.As(err, &ve), errors.Is(err, recipe.ErrBadOption)}
	if want := [4]bool{c.perm, c.unreach, c.cert, c.bad}; err == nil || got != want {
		t.Errorf("%s: [ErrNoPermission ErrUnreachable *CertificateVerificationError ErrBadOption] = %v, want %v; err %v", c.name, got, want, err)
	}
	if err != nil && !strings.Contains(err.Error(), c.says) {
		t.Errorf("%s: the error does not say %q: %v", c.name, c.says, err)
	}
	if c.within > 0 && took > c.within {
		t.Errorf("%s: took %v, want at most %v: %v", c.name, took, c.within, err)
	}
	t.Logf("%s (%v): %v", c.name, took.Round(time.Millisecond), err)
}

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
		{name: "server certificate not trusted", run: connect(url, etcdlock.WithTLS(wrongCA)), unreach: true, cert: true, says: "failed verification", within: 3 * time.Second},
		{name: "no client certificate", run: connect(url, etcdlock.WithTLS(&tls.Config{RootCAs: good.RootCAs})), perm: true, unreach: true, says: "refused the client certificate (none was presented)", within: 3 * time.Second},
		{name: "MaxVersion TLS 1.1", run: connect(url, etcdlock.WithTLS(tls11)), bad: true, says: "MaxVersion", within: time.Second},
		{name: "plaintext to a TLS endpoint", run: connect("etcd://" + srv.Endpoints()[0] + "/x"), unreach: true, says: "use etcds:// or WithTLS", within: 3 * time.Second},
		{name: "TLS to a plaintext endpoint", run: connect(plain.URL("/x"), etcdlock.WithTLS(good)), unreach: true, says: "is it a TLS client URL", within: 3 * time.Second},
		{name: "nothing listens", run: connect("etcd://127.0.0.1:1/x"), unreach: true, says: "connection refused", within: 3 * time.Second},
		{name: "a name that does not resolve", run: connect("etcd://no-such-host.invalid:2379/x"), unreach: true, says: "no-such-host.invalid"},
		{name: "a role without rights", run: func(t *testing.T) error { return deniedAcquire(t) }, perm: true, says: "permission denied"},
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
