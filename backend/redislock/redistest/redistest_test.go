package redistest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// TestLaunchClose: Launch gives a running server; Close stops it and
// removes its directory, and may be called again.
func TestLaunchClose(t *testing.T) {
	ctx := context.Background()
	s, err := Launch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ping(s.Addr(), readyTimeout); err != nil {
		s.Close()
		t.Fatalf("PING after Launch: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ping(s.Addr(), readyTimeout); err == nil {
		t.Error("the server answers after Close")
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("directory %s after Close: %v, want it gone", s.dir, err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestExternal: with REDIS_TEST_ADDR each Server is the named server under
// a key prefix of its own, whose keys Close deletes (and only those).
func TestExternal(t *testing.T) {
	ctx := context.Background()
	own := Start(t)
	c := own.Client(t)
	if err := c.Set(ctx, "other", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvAddr, own.Addr())
	ext := Start(t)
	if ext.Addr() != own.Addr() || ext.KeyPrefix() == own.KeyPrefix() {
		t.Fatalf("external Server %s prefix %q; want %s with a prefix of its own", ext.Addr(), ext.KeyPrefix(), own.Addr())
	}
	if err := c.Set(ctx, ext.KeyPrefix()+"k", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := ext.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, ext.KeyPrefix()+"k", "other").Result(); err != nil || n != 1 {
		t.Errorf("after Close: %d of the prefixed key and the other exist (%v), want the other only", n, err)
	}
}

// TestLaunchUnreachable: a REDIS_TEST_ADDR that nothing answers is no
// server: the error wraps ErrNoServer, names the variable and holds the
// install hint.
func TestLaunchUnreachable(t *testing.T) {
	t.Setenv(EnvAddr, "127.0.0.1:1")
	s, err := Launch(context.Background())
	if err == nil {
		s.Close()
		t.Fatal("Launch on an unreachable REDIS_TEST_ADDR succeeded")
	}
	if !errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), EnvAddr) || !strings.Contains(err.Error(), InstallHint) {
		t.Errorf("Launch: %v; want ErrNoServer naming %s with the install hint", err, EnvAddr)
	}
}
