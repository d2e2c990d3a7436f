package pgtest

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"testing"
)

// TestSharedTLS: the TLS server's databases answer over verify-full TLS with
// the client certificate, and refuse a plain connection and a TLS one
// without the certificate.
func TestSharedTLS(t *testing.T) {
	ctx := context.Background()
	dsn := SharedTLS(t).Database(t)
	try := func(dsn string) error {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		var ssl bool
		err = db.QueryRowContext(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl)
		if err == nil && !ssl {
			t.Errorf("connected without TLS: %s", dsn)
		}
		return err
	}
	if err := try(dsn); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	u, _ := url.Parse(dsn)
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	if err := try(u.String()); err == nil || !strings.Contains(err.Error(), "no pg_hba.conf entry") {
		t.Errorf("plain: err %v; want no pg_hba.conf entry", err)
	}
	q.Set("sslmode", "verify-full")
	q.Del("sslcert")
	q.Del("sslkey")
	u.RawQuery = q.Encode()
	if err := try(u.String()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("no client certificate: err %v; want a refusal naming the certificate", err)
	}
}
