package leader_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// The child process of TestHealthStoppedLeader: its servers, its lock, its
// Health's tolerance.
const (
	envStoppedChild = "LEADER_TEST_STOPPED_CHILD_SERVERS"
	stoppedLock     = "/leader/stopped"
	stoppedTol      = time.Second
)

// TestHealthStoppedLeader stops a leader process (SIGSTOP) past its
// ZooKeeper session: its liveness probe answers nothing while it is
// stopped (the probe's timeout is the failure a platform sees); another
// candidate is granted the lock once the session expired; continued
// (SIGCONT), the process, whose leader function ignores its context,
// answers 503 no sooner than the tolerance after it resumed and within the
// tolerance plus slack.
func TestHealthStoppedLeader(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHealthStoppedLeaderChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envStoppedChild+"="+strings.Join(cl.Servers(), ","))
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
	var url string
	for url == "" && lines.Scan() {
		url, _ = strings.CutPrefix(lines.Text(), "leading ")
	}
	if url == "" {
		t.Fatalf("the child did not lead: %v", lines.Err())
	}
	probe := func(timeout time.Duration) (int, error) {
		resp, err := (&http.Client{Timeout: timeout}).Get(url)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := probe(5 * time.Second); code != http.StatusOK {
		t.Fatalf("the leading child's probe: %d, %v", code, err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if _, err := probe(500 * time.Millisecond); err == nil {
		t.Fatal("a stopped process answered its probe")
	}
	m, err := mutex.New(rtest.Connect(t, cl), stoppedLock)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(ctx) // once the stopped leader's session expired
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	for {
		code, err := probe(5 * time.Second)
		since := time.Since(resumed)
		switch {
		case err != nil:
			t.Fatalf("the resumed child's probe: %v", err)
		case code == http.StatusServiceUnavailable && since < stoppedTol:
			t.Fatalf("unhealthy %v after resuming, sooner than the tolerance %v", since, stoppedTol)
		case code == http.StatusServiceUnavailable:
			t.Logf("unhealthy %v after resuming (tolerance %v)", since.Round(time.Millisecond), stoppedTol)
			return
		case since > stoppedTol+3*time.Second:
			t.Fatalf("still healthy %v after resuming (tolerance %v)", since, stoppedTol)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHealthStoppedLeaderChild is the leader process of
// TestHealthStoppedLeader (it does nothing in a normal run): a session of
// 2 s, leader.Run with a Health served on a loopback port, and a leader
// function that prints the probe's URL and never returns.
func TestHealthStoppedLeaderChild(t *testing.T) {
	servers := os.Getenv(envStoppedChild)
	if servers == "" {
		return // not the child
	}
	ctx := context.Background()
	s, err := zookeeper.Connect(ctx, strings.Split(servers, ","), zookeeper.WithSessionTimeout(2*time.Second),
		zookeeper.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	h, err := leader.NewHealth(stoppedTol)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln, h)
	m, err := mutex.New(s, stoppedLock)
	if err != nil {
		t.Fatal(err)
	}
	_ = leader.Run(ctx, m, func(context.Context, fence.Token) error {
		fmt.Printf("leading http://%s/\n", ln.Addr())
		select {} // ignores its context: a leader that does not stop
	}, leader.WithHealth(h), leader.WithLogger(slog.New(slog.DiscardHandler)))
}
