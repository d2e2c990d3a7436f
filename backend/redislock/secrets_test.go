package redislock_test

import (
	"github.com/zkrecipes/zkrecipes/testkit/rtest/connerrtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/secrettest"

	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
)

// The test password: `make test` fails if its output holds "s3cr3t-zkr-"
// anywhere (Makefile), so a password that leaks into an error or a log line
// shows up there even when the test that leaked it printed nothing.
const redisPW = "s3cr3t-zkr-redis"

// noSecret fails the test if text holds the test password or a part of it,
// naming what without printing it.
func noSecret(t *testing.T, what, text string) {
	t.Helper()
	secrettest.Absent(t, what, text, "zkr-redis")
}

// noSecretErr fails the test if err, an error it wraps, or a value a struct
// walker reaches from them holds the test password or a part of it
// (secrettest.AbsentErr), naming what without printing it.
func noSecretErr(t *testing.T, what string, err error) {
	t.Helper()
	secrettest.AbsentErr(t, what, err, "zkr-redis")
}

// TestBadURLHidesPassword: a URL Connect refuses is ErrBadURL, and the
// error shows no password: not the user information's (well formed or
// not), not a query parameter named like one, not a value go-redis quotes.
func TestBadURLHidesPassword(t *testing.T) {
	pw := redisPW
	for _, u := range []string{
		"redis://:" + pw + "@h1:6379,h2:6379",
		"redis://u:" + pw + "@h:6379/notadb",
		"redis://u:" + pw + "@h:6379/0?dial_timeout=x" + pw,
		"redis://h:6379/0?password=" + pw,
		"redis://h:6379/0?client_name=x&token=" + pw,
		"redis://:pa/" + pw + "@h:6379",
		"redis://:" + pw + "@[::1",
		"http://:" + pw + "@h:6379",
	} {
		_, err := redislock.Connect(context.Background(), u)
		if !errors.Is(err, redislock.ErrBadURL) {
			t.Errorf("Connect(%s) = %v, want ErrBadURL", strings.ReplaceAll(u, pw, "PW"), err)
			continue
		}
		noSecretErr(t, "Connect's error", err)
	}
}

// TestWrongPasswordHidden: against a server that asks for a password, a
// wrong one (the default user's requirepass, and an ACL user's) fails with
// the server's WRONGPASS, in Connect and in NewSession, and neither the
// error nor the log shows it.
func TestWrongPasswordHidden(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := srv.Client(t)
	if err := adm.Do(ctx, "ACL", "SETUSER", "zkr-secrets", "on", ">"+redisPW+"-user", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	if err := adm.ConfigSet(ctx, "requirepass", redisPW+"-default").Err(); err != nil {
		t.Fatalf("CONFIG SET requirepass: %v", err)
	}
	t.Cleanup(func() { // the harness's cleanup talks to the server without a password
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: redisPW + "-default"})
		defer c.Close()
		_ = c.ConfigSet(context.Background(), "requirepass", "").Err()
	})
	wrong := redisPW + "-wrong"
	for name, u := range map[string]string{
		"default user": "redis://:" + url.PathEscape(wrong) + "@" + srv.Addr() + "/0",
		"ACL user":     "redis://zkr-secrets:" + url.PathEscape(wrong) + "@" + srv.Addr() + "/0",
	} {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			s, err := redislock.Connect(ctx, u, redislock.WithLogger(log))
			if err == nil {
				s.Close()
				t.Fatal("Connect with a wrong password succeeded")
			}
			if !strings.Contains(err.Error(), "WRONGPASS") {
				t.Errorf("Connect: %s; want the server's WRONGPASS", strings.ReplaceAll(err.Error(), wrong, "PW"))
			}
			noSecretErr(t, "Connect's error", err)
			ro, perr := redis.ParseURL(u)
			if perr != nil {
				t.Fatal(perr)
			}
			ro.ContextTimeoutEnabled = true
			cli := redis.NewClient(ro)
			defer cli.Close()
			s, err = redislock.NewSession(ctx, cli, redislock.WithLogger(log))
			if err == nil {
				s.Close()
				t.Fatal("NewSession with a wrong password succeeded")
			}
			noSecretErr(t, "NewSession's error", err)
			noSecret(t, "the log", logs.String())
		})
	}
}

// TestUnreachableHidesPassword: a Connect that fails before AUTH is
// answered (another protocol's server, nothing listening, a port that
// never answers) keeps the URL's password nowhere in its error: not in its
// text, not in the errors it wraps, not in their fields.
func TestUnreachableHidesPassword(t *testing.T) {
	pw := redisPW + "-unreachable"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for name, addr := range map[string]string{
		"a wrong server":    connerrtest.HTTPServer(t),
		"nothing listening": closed,
		"a silent port":     connerrtest.BannerServer(t, ""),
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := redislock.Connect(ctx, "redis://app:"+pw+"@"+addr+"/0")
		cancel()
		if err == nil {
			s.Close()
			t.Fatalf("%s: Connect succeeded", name)
		}
		secrettest.AbsentErr(t, name+": Connect's error", err, "zkr-redis")
	}
}
