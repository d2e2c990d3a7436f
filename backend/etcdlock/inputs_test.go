package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
)

// TestConnectErrorsHidePassword: Connect refuses credentials in the URL
// without showing the password, however the URL is malformed (a password
// with a "/" makes "u:pa" look like an endpoint), also for a real server.
func TestConnectErrorsHidePassword(t *testing.T) {
	e := newEnv(t)
	real := strings.TrimPrefix(e.srv.URL(e.prefix), "etcd://")
	for _, u := range []string{
		"etcd://user:S3cretEtcdPW@127.0.0.1:1", "etcd://user:S3cretEtcdPW@" + real,
		"etcd://user:S3cret/EtcdPW@127.0.0.1:1", "etcd://user:S3cret:EtcdPW/x@127.0.0.1:1",
		"etcd://user:S3cretEtcdPW@h:1?x=1", "etcd:/user:S3cretEtcdPW@h:1", "http://user:S3cretEtcdPW@h:1",
		"etcd://h:1,user:S3cretEtcdPW@h:2",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := etcdlock.Connect(ctx, u)
		cancel()
		if err == nil {
			s.Close()
			t.Errorf("Connect(%q) succeeded", u)
			continue
		}
		if !errors.Is(err, etcdlock.ErrBadURL) {
			t.Errorf("Connect(%q): %v, want an error matching ErrBadURL", u, err)
		}
		if msg := err.Error(); strings.Contains(msg, "S3cret") || strings.Contains(msg, "PW") {
			t.Errorf("Connect(%q) shows the password: %v", u, err)
		}
		t.Logf("%v", err)
	}
}

// TestNilOptionsAreSkipped: a nil Option is skipped and WithLogger(nil)
// means slog.Default(), as in package zookeeper.
func TestNilOptionsAreSkipped(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := etcdlock.Connect(ctx, e.srv.URL(e.prefix), nil, etcdlock.WithLogger(nil))
	if err != nil {
		t.Fatalf("Connect with a nil Option and WithLogger(nil): %v", err)
	}
	defer s.Close()
	m, err := etcdlock.New(s, "nil-options")
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
