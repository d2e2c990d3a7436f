package pglock

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
)

// A child process of the test binary (see TestMain) that holds or waits for
// a lock until it is killed.
const (
	childEnv     = "PGLOCK_TEST_CHILD" // "hold", "hold-delayed" (WithLockDelay(shortDelay)) or "wait"
	childDSNEnv  = "PGLOCK_TEST_CHILD_DSN"
	childLockEnv = "PGLOCK_TEST_CHILD_LOCK"
)

// runChild is the child's main: it prints "granted <token>" once it holds
// the lock ("hold") or "waiting" just before it starts waiting ("wait"),
// then blocks until killed.
func runChild(mode string) int {
	ctx := context.Background()
	s, err := Connect(ctx, os.Getenv(childDSNEnv), WithTTL(testTTL), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	var opts []MutexOption
	if mode == "hold-delayed" {
		opts = append(opts, WithLockDelay(shortDelay))
	}
	m, err := New(s, os.Getenv(childLockEnv), opts...)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	if mode == "wait" {
		fmt.Println("waiting")
	}
	l, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("granted", l.Token())
	select {}
}

// startChild starts a child in mode on lock and returns it and its first
// line of output. A cleanup kills it.
func startChild(t *testing.T, mode, dsn, lock string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childDSNEnv+"="+dsn, childLockEnv+"="+lock)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- strings.TrimSpace(line)
		io.Copy(io.Discard, out)
	}()
	select {
	case line := <-lines:
		if strings.HasPrefix(line, "error") || line == "" {
			t.Fatalf("child (%s): %q", mode, line)
		}
		return cmd, line
	case <-time.After(opTimeout):
		t.Fatalf("child (%s) said nothing within %v", mode, opTimeout)
		return nil, ""
	}
}

// TestKilledHolderProcessFreesAtOnce: when a holder's process dies, its
// kernel closes the connection and PostgreSQL ends the session and frees the
// lock at once, without waiting for the TTL. That is safe: a dead process
// can't act on the lock any more (its writes already in flight are what
// fencing tokens are for). The conformance suite's Crash is a host that
// vanishes silently instead, which the TTL bounds.
func TestKilledHolderProcessFreesAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const lock = "killed-holder"
	child, line := startChild(t, "hold", h.dsn, lock)
	childTok, err := fence.ParseToken(strings.TrimPrefix(line, "granted "))
	if err != nil {
		t.Fatalf("child said %q: %v", line, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	b := h.NewClient(t, lock).(*client)
	pb := acquireAsync(t, b.Mutex, ctx)
	h.waitLocks(t, lock, 2)

	killed := time.Now()
	child.Process.Kill()
	r := awaitResult(t, pb, opTimeout, "B, waiting for the killed holder's lock")
	if r.err != nil {
		t.Fatalf("B: %v", r.err)
	}
	freed := r.at.Sub(killed)
	t.Logf("the killed holder's lock was granted to B %v after the kill (the TTL is %v)", freed.Round(time.Millisecond), testTTL)
	if freed >= testTTL/2 {
		t.Errorf("granted %v after the kill: the server waited for a timeout instead of seeing the close", freed)
	}
	if r.lease.Token() <= childTok {
		t.Errorf("B's token %v is not larger than the killed holder's %v", r.lease.Token(), childTok)
	}
	mustRelease(t, r.lease)
}

// TestKilledWaiterLeavesQueue: a waiter whose process dies sends no cancel
// request; the server sees its closed connection within a ping interval
// (client_connection_check_interval) and takes it out of the queue, so it is
// never granted a lock nobody will release.
func TestKilledWaiterLeavesQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const lock = "killed-waiter"
	a := h.NewClient(t, lock).(*client)
	la := mustAcquire(t, a.Mutex)
	child, _ := startChild(t, "wait", h.dsn, lock)
	h.waitLocks(t, lock, 2)

	killed := time.Now()
	child.Process.Kill()
	h.waitLocks(t, lock, 1)
	t.Logf("the killed waiter left the queue %v after the kill (check interval %v)",
		time.Since(killed).Round(time.Millisecond), testTTL/10)
	if err := la.Context().Err(); err != nil {
		t.Fatalf("the holder's lease ended: %v", context.Cause(la.Context()))
	}
	mustRelease(t, la)
	h.waitLocks(t, lock, 0)
}
