package pglock

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// TestConnectErrorsHidePassword: no error of Connect shows the URL's
// password: for strings pgconn can't parse, for an unreachable server and
// for a real server refusing the password.
func TestConnectErrorsHidePassword(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	withPW := strings.Replace(h.dsn, "://"+h.cfg.User+"@", "://nosuchuser:S3cretPgPW@", 1)
	if withPW == h.dsn {
		t.Fatalf("can't add a password to %q", h.dsn)
	}
	for _, u := range []string{
		"postgres://u:S3cretPgPW@h:notaport/db", "postgres://u:S3cret PgPW@h/db", "postgres://u:S3cret%zzPW@h/db",
		"postgres:/u:S3cretPgPW@h/db", "postgres://u:S3cretPgPW@h/db?sslmode=bogus",
		"host=h password=S3cretPgPW port=x",
		"postgres://u:S3cretPgPW@127.0.0.1:" + closed + "/db?sslmode=disable",
		withPW,
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := Connect(ctx, u)
		cancel()
		if err == nil {
			s.Close()
			t.Errorf("Connect(%q) succeeded", u)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "S3cret") || strings.Contains(msg, "PW") {
			t.Errorf("Connect(%q) shows the password: %v", u, err)
		}
		t.Logf("%v", err)
	}
}

// TestNilOptionsAreSkipped: a nil Option is skipped and WithLogger(nil)
// means slog.Default(), as in package zookeeper; a nil *pgconn.Config is
// recipe.ErrBadOption, not a panic.
func TestNilOptionsAreSkipped(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ConnectConfig(ctx, nil); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("ConnectConfig(ctx, nil) = %v, want an error matching recipe.ErrBadOption", err)
	}
	s, err := Connect(ctx, h.dsn, nil, WithLogger(nil), WithTTL(testTTL))
	if err != nil {
		t.Fatalf("Connect with a nil Option and WithLogger(nil): %v", err)
	}
	defer s.Close()
	cfg := h.cfg.Copy()
	s2, err := ConnectConfig(ctx, cfg, nil)
	if err != nil {
		t.Fatalf("ConnectConfig with a nil Option: %v", err)
	}
	s2.Close()
	m, err := New(s, "nil-options")
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, mustAcquire(t, m))
}
