package k8slease_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/connerrtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/secrettest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// TestConnectErrors checks Connect's refusals: bad options, a nil config,
// a server that refuses connections (at once) or is silent (at the connect
// timeout).
func TestConnectErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := k8slease.Connect(ctx, nil); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("nil config: %v", err)
	}
	if _, err := k8slease.Connect(ctx, &rest.Config{Host: "https://127.0.0.1:1"}, k8slease.WithLeaseDuration(500*time.Millisecond)); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("bad duration: %v", err)
	}
	start := time.Now()
	// Unreachable in the words of every backend (issue 37 item 9).
	if _, err := k8slease.Connect(ctx, &rest.Config{Host: "https://127.0.0.1:1"}); !errors.Is(err, recipe.ErrUnreachable) || !strings.HasPrefix(err.Error(), unreachableWords) {
		t.Errorf("refused: %v; want recipe.ErrUnreachable worded %q...", err, unreachableWords)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // accepts nothing: silent
	if _, err := k8slease.Connect(ctx, &rest.Config{Host: "https://" + ln.Addr().String()}, k8slease.WithConnectTimeout(500*time.Millisecond)); !errors.Is(err, k8slease.ErrUnreachable) || !strings.HasPrefix(err.Error(), unreachableWords) {
		t.Errorf("silent: %v; want k8slease.ErrUnreachable worded %q...", err, unreachableWords)
	}
	// The caller's deadline before the connect timeout: unreachable and the
	// deadline, as on every backend.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = k8slease.Connect(short, &rest.Config{Host: "https://" + ln.Addr().String()})
	cancel()
	if !errors.Is(err, recipe.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), unreachableWords) {
		t.Errorf("silent until ctx's deadline: %v; want recipe.ErrUnreachable and context.DeadlineExceeded worded %q...", err, unreachableWords)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("unreachable servers took %v", took)
	}
	// The real API server behind a proxy that forwards nothing: unreachable
	// at the connect timeout, in the same words.
	p := serverkit.NewFaultProxy()
	defer p.Close()
	viaProxy, err := k8stest.Shared(t).ProxiedConfig(p, k8stest.User)
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	if _, err := k8slease.Connect(ctx, viaProxy, k8slease.WithConnectTimeout(time.Second)); !errors.Is(err, k8slease.ErrUnreachable) || !strings.HasPrefix(err.Error(), unreachableWords) {
		t.Errorf("blackholed: %v; want k8slease.ErrUnreachable worded %q...", err, unreachableWords)
	}
	// A token the real API server does not know (401) is refused in the
	// words of every backend (issue 37 item 9).
	bad := k8stest.Shared(t).Config()
	bad.BearerToken = "s3cr3t-zkr-no-such-token"
	_, err = k8slease.Connect(ctx, bad)
	if !errors.Is(err, recipe.ErrNoPermission) || !apierrors.IsUnauthorized(err) || !strings.HasPrefix(err.Error(), connerrtest.RefusedWords) {
		t.Errorf("unknown token: %v; want recipe.ErrNoPermission and a 401 worded %q...", err, connerrtest.RefusedWords)
	}
	secrettest.AbsentErr(t, "the unknown token's error", err, "s3cr3t-zkr-no-such-token")
}

// unreachableWords start the error of a Connect that reached no server, on
// every backend.
const unreachableWords = "recipe: connect: server unreachable: "

// TestSameSessionContenders checks that two acquisitions of one Session
// are two contenders, and that Close clears what the Session holds (the
// Lease names no holder after it) and ends its leases.
func TestSameSessionContenders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, _ := e.connect(t, k8stest.AdminUser)
	m := mutex(t, s, "same")
	l, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		t.Errorf("second acquisition of one Session: %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := context.Cause(l.Context()); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("lease after Close: %v", err)
	}
	if who, err := e.holder(ctx, "same"); err != nil || who != "" {
		t.Errorf("holder after Close: %q, %v", who, err)
	}
	if _, err := m.Acquire(ctx); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("acquire after Close: %v", err)
	}
}

// TestMissingNamespace checks that a lock in a namespace that does not
// exist fails at once with a *recipe.OpError matching ErrNoNamespace (the
// create's "not found"), instead of trying again.
func TestMissingNamespace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t, k8stest.AdminUser)
	m := mutex(t, s, "no-such-namespace-zkr/lock")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := m.Acquire(ctx)
	var op *recipe.OpError
	if !errors.As(err, &op) || !errors.Is(err, k8slease.ErrNoNamespace) || !recipe.Permanent(err) || ctx.Err() != nil {
		t.Errorf("acquire in a missing namespace: %v, want a *recipe.OpError matching k8slease.ErrNoNamespace at once", err)
	}
}
