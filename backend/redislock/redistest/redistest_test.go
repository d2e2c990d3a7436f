package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
	if err := ping(s.Addr(), nil, readyTimeout); err != nil {
		s.Close()
		t.Fatalf("PING after Launch: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ping(s.Addr(), nil, readyTimeout); err == nil {
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
// a key prefix of its own, whose keys Close deletes (and only those); it
// can't be killed or restarted.
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
	if err := ext.Kill(); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Kill of the external server = %v, want ErrUnsupported", err)
	}
	if err := ext.Restart(ctx); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Restart of the external server = %v, want ErrUnsupported", err)
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

// TestCloseEndsForkedChildren: Close returns only once the processes the
// server forked have ended too, such as the AOF rewrite a replica starts
// after its sync (made to last 2 s here): none of them writes into the
// directory after Close removed it.
func TestCloseEndsForkedChildren(t *testing.T) {
	ctx := context.Background()
	primary := Start(t)
	c := primary.Client(t)
	for i := range 20 {
		if err := c.Set(ctx, fmt.Sprint("k", i), "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	host, port, _ := net.SplitHostPort(primary.Addr())
	replica := Start(t, WithArgs("--replicaof", host, port, "--rdb-key-save-delay", "100000")) // 100 ms a key
	started := regexp.MustCompile(`rewriting started by pid (\d+)`)
	var m []string
	for deadline := time.Now().Add(readyTimeout); m == nil; {
		if m = started.FindStringSubmatch(replica.LogTail(100)); m == nil && time.Now().After(deadline) {
			t.Fatalf("the replica started no AOF rewrite; log:\n%s", replica.LogTail(30))
		}
		time.Sleep(10 * time.Millisecond)
	}
	child, _ := strconv.Atoi(m[1])
	if err := replica.Close(); err != nil {
		t.Fatal(err)
	}
	if !ended(child) {
		t.Errorf("the replica's AOF rewrite child %d runs after Close", child)
	}
}

// ended reports whether process pid has ended (a zombie waiting to be
// reaped counts as ended).
func ended(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(b, ')')
	return err == nil && i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// An ended ctx is not a missing install: Launch's error then wraps ctx's
// error, not ErrNoServer.
func TestLaunchInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupt signal received"))
	_, err := LaunchLocal(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), "interrupt signal received") {
		t.Fatalf("LaunchLocal with an ended ctx: %v, want context.Canceled with its cause, not ErrNoServer", err)
	}
}
