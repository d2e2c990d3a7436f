package etcdlock_test

import (
	"github.com/zkrecipes/zkrecipes/testkit/rtest/secrettest"

	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
)

// The test password: `make test` fails if its output holds "s3cr3t-zkr-"
// anywhere (Makefile), so a password that leaks into an error or a log line
// shows up there even when the test that leaked it printed nothing.
const etcdPW = "s3cr3t-zkr-etcd"

// noSecret fails the test if text holds the test password or a part of it,
// naming what without printing it.
func noSecret(t *testing.T, what, text string) {
	t.Helper()
	secrettest.Absent(t, what, text, "zkr-etcd")
}

// noSecretErr fails the test if err, an error it wraps, or a value a struct
// walker reaches from them holds the test password or a part of it
// (secrettest.AbsentErr), naming what without printing it.
func noSecretErr(t *testing.T, what string, err error) {
	t.Helper()
	secrettest.AbsentErr(t, what, err, "zkr-etcd")
}

// TestBadURLHidesPassword: Connect refuses credentials in the URL (they go
// in the client given to NewSession), and its ErrBadURL shows no password:
// not the user information's, well formed or not, nor a query parameter's.
func TestBadURLHidesPassword(t *testing.T) {
	for _, u := range []string{
		"etcd://root:" + etcdPW + "@h:2379",
		"etcd://root:pa/" + etcdPW + "@h:2379/app",
		"etcd://root:" + etcdPW + "@h:2379,h2:x",
		"etcd://h:2379/app?password=" + etcdPW,
		"etcd://h:2379/app?token=" + etcdPW + "#frag",
		"http://root:" + etcdPW + "@h:2379",
	} {
		_, err := etcdlock.Connect(context.Background(), u)
		if !errors.Is(err, etcdlock.ErrBadURL) {
			t.Errorf("Connect(%s) = %v, want ErrBadURL", strings.ReplaceAll(u, etcdPW, "PW"), err)
			continue
		}
		noSecretErr(t, "Connect's error", err)
	}
}

// TestWrongPasswordHidden: against a server with authentication on, a
// client with a wrong password, and one whose user may not write the
// session's keys, fail without showing the password in any error or log
// line (the client's zap log included).
func TestWrongPasswordHidden(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := srv.Client(t)
	for _, step := range []func() error{
		func() error { _, err := adm.UserAdd(ctx, "root", etcdPW+"-root"); return err },
		func() error { _, err := adm.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := adm.UserAdd(ctx, "zkr-noperm", etcdPW+"-user"); return err },
		func() error { _, err := adm.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("enabling authentication: %v", err)
		}
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	zl := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(&logs), zap.DebugLevel))
	client := func(user, pw string) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), Username: user, Password: pw,
			DialTimeout: 10 * time.Second, Logger: zl})
	}

	cli, err := client("root", etcdPW+"-wrong")
	if err == nil { // the client authenticates when it is made; if it did not, the Session must fail
		defer cli.Close()
		if s, err2 := etcdlock.NewSession(ctx, cli, etcdlock.WithLogger(log)); err2 == nil {
			s.Close()
			t.Fatal("NewSession with a wrong password succeeded")
		} else {
			err = err2
		}
	}
	if !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("a wrong password: %s; want etcd's authentication failure", strings.ReplaceAll(err.Error(), etcdPW, "PW"))
	}
	noSecretErr(t, "the wrong password's error", err)

	cli, err = client("zkr-noperm", etcdPW+"-user")
	if err != nil {
		t.Fatalf("the user's client: %s", strings.ReplaceAll(err.Error(), etcdPW, "PW"))
	}
	defer cli.Close()
	s, err := etcdlock.NewSession(ctx, cli, etcdlock.WithLogger(log), etcdlock.WithTTL(5*time.Second))
	if err == nil {
		defer s.Close()
		var m *etcdlock.Mutex
		if m, err = etcdlock.New(s, "secrets"); err == nil {
			var l interface{ Release(context.Context) error }
			if l, err = m.Acquire(ctx); err == nil {
				_ = l.Release(ctx)
				t.Fatal("Acquire by a user without permissions succeeded")
			}
		}
	}
	if err == nil {
		t.Fatal("a user without permissions: no error")
	}
	noSecretErr(t, "the user without permissions' error", err)
	noSecret(t, "the log", logs.String())
}

// syncBuffer is a bytes.Buffer the client's and the session's loggers can
// write from their goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
