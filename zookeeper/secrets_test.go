package zookeeper_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/connerrtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/secrettest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// The test password: `make test` fails if its output holds "s3cr3t-zkr-"
// anywhere (Makefile), so a password that leaks into an error or a log line
// shows up there even when the test that leaked it printed nothing.
const zkPW = "s3cr3t-zkr-zookeeper"

// noSecret fails the test if text holds the test password or a part of it,
// naming what without printing it.
func noSecret(t *testing.T, what, text string) {
	t.Helper()
	secrettest.Absent(t, what, text, "zkr-zookeeper")
}

// noSecretErr fails the test if err, an error it wraps, or a value a struct
// walker reaches from them holds the test password or a part of it
// (secrettest.AbsentErr), naming what without printing it.
func noSecretErr(t *testing.T, what string, err error) {
	t.Helper()
	secrettest.AbsentErr(t, what, err, "zkr-zookeeper")
}

// TestAuthBytesNotShown: the bytes given to WithAuth never show in an error
// or a log line: not when they are over the packet limit, not when the
// server refuses the scheme, not when a digest with a wrong password is
// refused access to a node whose ACL wants the right one.
func TestAuthBytesNotShown(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	servers := cl.Servers()
	chroot := strings.TrimPrefix(servers[len(servers)-1], cl.Addrs()[len(servers)-1]) // Conn's paths are not under it
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := func(opts ...zookeeper.Option) (*zookeeper.Session, error) {
		return zookeeper.Connect(ctx, servers, append([]zookeeper.Option{zookeeper.WithLogger(log)}, opts...)...)
	}

	big := []byte("zkr:" + zkPW + strings.Repeat("x", 1<<20-1)) // over the default packet limit
	if _, err := connect(zookeeper.WithAuth("digest", big)); !errors.Is(err, recipe.ErrTooLarge) {
		t.Errorf("WithAuth over the limit: %v, want ErrTooLarge", err)
	} else {
		noSecretErr(t, "the over-limit error", err)
	}

	if s, err := connect(zookeeper.WithAuth("zkr-no-such-scheme", []byte("zkr:"+zkPW))); err == nil {
		s.Close()
		t.Error("Connect with an unknown auth scheme succeeded")
	} else {
		if !errors.Is(err, recipe.ErrNoPermission) || !errors.Is(err, zk.ErrAuthFailed) || !strings.HasPrefix(err.Error(), connerrtest.RefusedWords) {
			t.Errorf("Connect with an unknown auth scheme: %v, want ErrNoPermission and zk.ErrAuthFailed worded %q...", err, connerrtest.RefusedWords)
		}
		noSecretErr(t, "the refused scheme's error", err)
	}

	dir := "/zkr-secrets-" + rand.Text()[:8]
	owner, err := connect(zookeeper.WithAuth("digest", []byte("zkr:"+zkPW)))
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	if _, err := owner.Conn().Create(chroot+dir, nil, 0, zk.DigestACL(zk.PermAll, "zkr", zkPW)); err != nil {
		t.Fatal(err)
	}
	other, err := connect(zookeeper.WithAuth("digest", []byte("zkr:"+zkPW+"-wrong")))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	m, err := mutex.New(other, dir+"/lock")
	if err != nil {
		t.Fatal(err)
	}
	if l, err := m.TryAcquire(ctx); err == nil {
		_ = l.Release(ctx)
		t.Error("TryAcquire with a wrong digest password succeeded")
	} else {
		if !errors.Is(err, recipe.ErrNoPermission) {
			t.Errorf("TryAcquire with a wrong digest password: %v, want ErrNoPermission", err)
		}
		noSecretErr(t, "TryAcquire's error", err)
	}
	other.Close()
	if err := owner.Conn().Delete(chroot+dir, -1); err != nil {
		t.Errorf("deleting %s: %v", dir, err)
	}
	owner.Close()
	noSecret(t, "the log", logs.String())
}

// syncBuffer is a bytes.Buffer the sessions' goroutines can log to.
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

// TestSessionPrintHidesAuth: printing a Session (%v, %+v, %#v, %s: a user's
// log line, a panic reporter) shows no byte of what WithAuth was given, in
// any of the forms fmt prints bytes in.
func TestSessionPrintHidesAuth(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	auth := []byte("zkr:" + zkPW)
	s, err := zookeeper.Connect(ctx, zktest.Shared(t).Servers(), zookeeper.WithAuth("digest", auth))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	forms := []string{ // auth as fmt prints a []byte field with %v and with %#v
		strings.Trim(fmt.Sprint(auth), "[]"),
		strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%#v", auth), "[]byte{"), "}"),
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		secrettest.Absent(t, verb+" of the Session", fmt.Sprintf(verb, s), append(forms, "zkr-zookeeper")...)
	}
}
