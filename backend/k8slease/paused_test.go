package k8slease_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The environment of the child process of TestPausedHolder.
const (
	envChild      = "K8SLEASE_TEST_CHILD_KUBECONFIG"
	envChildNS    = "K8SLEASE_TEST_CHILD_NAMESPACE"
	pausedLockNam = "paused"
)

// TestPausedHolder stops a holder process (SIGSTOP) past its lease: a
// waiter takes the Lease over a duration after the holder's last renewal,
// with a larger token; the holder, continued (SIGCONT), sees its context
// end at once, and its Release returns recipe.ErrLeaseLost and leaves the
// new holder named.
func TestPausedHolder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := k8stest.WriteKubeconfig(kubeconfig, e.c.Config()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestPausedHolderChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"="+kubeconfig, envChildNS+"="+e.ns)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("child ended: %v", lines.Err())
		}
		return lines.Text()
	}
	var childToken uint64
	for line := next(); !strings.HasPrefix(line, "token "); line = next() {
	}
	// (the scan above stops at the token line; read it again from the buffer)
	if _, err := fmt.Sscanf(lines.Text(), "token %d", &childToken); err != nil {
		t.Fatal(err)
	}

	s, _ := e.connect(t, k8stest.AdminUser)
	m := mutex(t, s, pausedLockNam)
	time.Sleep(testDuration / 3) // a renewal or two
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	l, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(stopped); took < testDuration*5/6-200*time.Millisecond {
		t.Errorf("the paused holder's Lease was taken %v after the pause, want about %v", took, testDuration)
	}
	if uint64(l.Token()) <= childToken {
		t.Errorf("new token %d, paused holder's %d", l.Token(), childToken)
	}
	time.Sleep(testDuration / 2) // past the lease by far
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	line := next()
	if !strings.HasPrefix(line, "lost ") || !strings.Contains(line, "release=lease lost") {
		t.Errorf("child after SIGCONT: %q", line)
	}
	if took := time.Since(resumed); took > time.Second {
		t.Errorf("the resumed holder saw its loss %v after SIGCONT", took)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("child: %v", err)
	}
	if who, err := e.holder(ctx, pausedLockNam); err != nil || !strings.HasPrefix(who, s.Identity()) {
		t.Errorf("holder after the stale Release: %q, %v (want %s#...)", who, err, s.Identity())
	}
	if err := l.Release(ctx); err != nil {
		t.Error(err)
	}
}

// TestPausedHolderChild is the holder process of TestPausedHolder (it does
// nothing in a normal run): it takes the Lease, prints its token, and when
// its lease context ends prints the cause and what Release returned.
func TestPausedHolderChild(t *testing.T) {
	path := os.Getenv(envChild)
	if path == "" {
		return // not the child: nothing to do
	}
	cfg, err := k8slease.ConfigFromKubeconfig(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := k8slease.Connect(ctx, cfg, k8slease.WithLeaseDuration(testDuration), k8slease.WithNamespace(os.Getenv(envChildNS)), k8slease.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := mutex(t, s, pausedLockNam).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("token %d\n", l.Token())
	<-l.Context().Done()
	rerr := l.Release(ctx)
	label := "nil"
	if errors.Is(rerr, recipe.ErrLeaseLost) {
		label = "lease lost"
	}
	fmt.Printf("lost %v release=%s\n", context.Cause(l.Context()), label)
}
