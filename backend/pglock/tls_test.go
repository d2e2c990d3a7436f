package pglock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// TestTLSConformance runs the conformance suite's connection properties
// (locktest.RunTransport) over TLS with a client
// certificate (WithTLS, through each client's fault proxy), on the shared
// TLS server, which takes TCP clients only over TLS with a certificate.
func TestTLSConformance(t *testing.T) {
	t.Parallel()
	srv := pgtest.SharedTLS(t)
	locktest.RunTransport(t, newHarnessOn(t, srv.Database(t), WithTLS(srv.ClientTLS())))
}

// tlsConnect opens and closes a Session on dsn with opts, returning
// Connect's error.
func tlsConnect(dsn string, opts ...Option) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Connect(ctx, dsn, append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err == nil {
		s.Close()
	}
	return err
}

// withQuery returns dsn with its query parameters set as in kv (key,
// value, ...; an empty value deletes the key).
func withQuery(t *testing.T, dsn string, kv ...string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			q.Del(kv[i])
		} else {
			q.Set(kv[i], kv[i+1])
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// TestTLSRefusals: WithTLS wins over the URL's TLS settings, both ways: a
// server certificate from another authority fails verification with a
// typed error although the URL names the right one; no client certificate
// is refused although the URL names one; sslmode=disable with WithTLS
// is TLS (the server has no plain entry); on a plain server WithTLS fails
// where the URL's default sslmode=prefer falls back to plaintext;
// InsecureSkipVerify alone and a Unix socket are refused.
func TestTLSRefusals(t *testing.T) {
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

	err = tlsConnect(dsn, WithTLS(wrongCA))
	var ve *tls.CertificateVerificationError
	if !errors.As(err, &ve) {
		t.Errorf("wrong authority: err %v; want a *tls.CertificateVerificationError", err)
	}
	t.Logf("wrong authority: %v", err)

	err = tlsConnect(dsn, WithTLS(&tls.Config{RootCAs: good.RootCAs}))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("no client certificate: err %v; want a refusal naming the certificate", err)
	}
	t.Logf("no client certificate: %v", err)

	bare := withQuery(t, dsn, "sslmode", "disable", "sslrootcert", "", "sslcert", "", "sslkey", "")
	if err := tlsConnect(bare, WithTLS(good)); err != nil {
		t.Errorf("sslmode=disable with WithTLS: %v", err)
	}

	plain := withQuery(t, pgtest.Shared(t).Database(t), "sslmode", "")
	if err := tlsConnect(plain); err != nil {
		t.Fatalf("plain server, sslmode=prefer: %v", err)
	}
	if err := tlsConnect(plain, WithTLS(good)); err == nil {
		t.Error("plain server with WithTLS: connected (plaintext fallback)")
	} else {
		t.Logf("plain server with WithTLS: %v", err)
	}

	if err := tlsConnect(dsn, WithTLS(&tls.Config{InsecureSkipVerify: true})); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("InsecureSkipVerify: err %v; want recipe.ErrBadOption", err)
	}
	socket := fmt.Sprintf("host=/tmp port=%d user=x dbname=y", 5432)
	if err := tlsConnect(socket, WithTLS(good)); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("Unix socket: err %v; want recipe.ErrBadOption", err)
	}
}
