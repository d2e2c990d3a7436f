package redislock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// showsSecret reports whether text shows any part of the passwords of
// TestConnectErrorsHidePassword ("S3cret…PW").
func showsSecret(text string) bool {
	return strings.Contains(text, "S3cret") || strings.Contains(text, "PW")
}

// TestConnectErrorsHidePassword: no error of Connect, and no line it logs,
// shows the URL's password: for URLs it refuses (some of which net/url
// can't parse, and net/url's errors quote the whole URL), for an unreachable
// server, and for a real server that has no password set.
func TestConnectErrorsHidePassword(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Client(t).Do(ctx, "ACL", "SETUSER", "trial", "on", ">OtherPassword", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	for _, u := range []string{
		"redis://:S3cretRedisPW@a:1,b:2/0", "redis://:S3cretRedisPW@/0", "http://:S3cretRedisPW@host",
		"redis:/:S3cretRedisPW@host:6379", "redis://:S3cret RedisPW@host:6379", "redis://:S3cret/RedisPW@host:6379",
		"redis://:S3cret%zzPW@host:6379", "redis://u:S3cretRedisPW@host:6379/notadb",
		"redis://u:S3cretRedisPW@host:6379/0?dial_timeout=soon",
		"redis://:S3cretRedisPW@" + closed + "/0",
		"redis://trial:S3cretRedisPW@" + srv.Addr() + "/0", // a real server: WRONGPASS
	} {
		var logs bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := redislock.Connect(ctx, u, redislock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		cancel()
		if s != nil {
			s.Close()
			t.Errorf("Connect(%q) succeeded", u)
			continue
		}
		if showsSecret(err.Error()) || showsSecret(logs.String()) {
			t.Errorf("Connect(%q) shows the password:\nerr: %v\nlog: %s", u, err, logs.String())
		}
		t.Logf("%v", err)
	}
}

// TestNilOptionsAreSkipped: a nil Option is skipped and WithLogger(nil)
// means slog.Default(), as in package zookeeper.
func TestNilOptionsAreSkipped(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := redislock.Connect(ctx, srv.URL(), nil, redislock.WithLogger(nil), redislock.WithKeyPrefix(srv.KeyPrefix()))
	if err != nil {
		t.Fatalf("Connect with a nil Option and WithLogger(nil): %v", err)
	}
	defer s.Close()
	s2, err := redislock.NewSession(ctx, srv.Client(t), nil, redislock.WithLogger(nil))
	if err != nil {
		t.Fatalf("NewSession with a nil Option and WithLogger(nil): %v", err)
	}
	defer s2.Close()
	m, err := redislock.New(s, "nil-options")
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNewOnClosedSession: New on a closed session returns an error matching
// recipe.ErrSessionClosed, as Session.Close documents.
func TestNewOnClosedSession(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := redislock.Connect(ctx, srv.URL(), redislock.WithKeyPrefix(srv.KeyPrefix()))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if m, err := redislock.New(s, "x"); !errors.Is(err, recipe.ErrSessionClosed) || m != nil {
		t.Fatalf("New on a closed session = %v, %v; want nil and an error matching recipe.ErrSessionClosed", m, err)
	}
}
