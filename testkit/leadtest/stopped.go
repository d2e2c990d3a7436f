package leadtest

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
	"github.com/zkrecipes/zkrecipes/recipe"
)

// StoppedTolerance is the tolerance of the Health of StoppedLeaderChild.
const StoppedTolerance = time.Second

// StoppedLeader stops a leader process (SIGSTOP) past its lease: the test
// binary run again as the test child (-test.run=^child$, with env added),
// which calls StoppedLeaderChild on a lock of short lease. It checks: the
// stopped process answers no liveness probe (the probe's timeout is the
// failure a platform sees); other, a lock on the same name in this
// process, is granted meanwhile; continued (SIGCONT), the process, whose
// leader function ignores its context, answers 503 no sooner than
// StoppedTolerance after resuming and within it plus slack.
func StoppedLeader(t *testing.T, child string, env []string, other recipe.Lock) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+child+"$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), env...)
	// A group of its own: if this process dies while the child is stopped,
	// the orphaned group gets SIGHUP and SIGCONT from the kernel, and the
	// child dies (StoppedLeaderChild also ends when its parent changes).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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
	if code, err := probe(url, 5*time.Second); code != http.StatusOK {
		t.Fatalf("the leading child's probe: %d, %v", code, err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	awaitStopped(t, cmd.Process.Pid)
	if _, err := probe(url, 500*time.Millisecond); err == nil {
		t.Fatal("a stopped process answered its probe")
	}
	l, err := other.Acquire(ctx) // once the stopped leader's lease expired
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	resumed := time.Now() // before the signal: a lower bound of the resumption
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for {
		code, err := probe(url, 5*time.Second)
		since := time.Since(resumed)
		switch {
		case err != nil:
			t.Fatalf("the resumed child's probe: %v", err)
		case code == http.StatusServiceUnavailable && since < StoppedTolerance:
			t.Fatalf("unhealthy %v after resuming, sooner than the tolerance %v", since, StoppedTolerance)
		case code == http.StatusServiceUnavailable:
			t.Logf("unhealthy %v after resuming (tolerance %v)", since.Round(time.Millisecond), StoppedTolerance)
			return
		case since > StoppedTolerance+3*time.Second:
			t.Fatalf("still healthy %v after resuming (tolerance %v)", since, StoppedTolerance)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitStopped waits until child pid has stopped, every thread of it
// (wait4 with WUNTRACED reports the group stop once complete; it reaps
// nothing): a signal is delivered asynchronously, and a thread of a loaded
// process may still answer a request meanwhile.
func awaitStopped(t *testing.T, pid int) {
	t.Helper()
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, syscall.WUNTRACED, nil)
		switch {
		case err == syscall.EINTR:
		case err != nil:
			t.Fatal(err)
		case ws.Stopped():
			return
		default:
			t.Fatalf("the child ended instead of stopping: %v", ws)
		}
	}
}

// probe is a liveness probe of url with timeout, on a connection of its
// own: its status code.
func probe(url string, timeout time.Duration) (int, error) {
	resp, err := (&http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}).Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// StoppedLeaderChild is the leader process of StoppedLeader: leader.Run
// over lock with a Health of StoppedTolerance served on a loopback port,
// and a leader function that prints the probe's URL and never returns. It
// returns only if Run does.
func StoppedLeaderChild(t *testing.T, lock recipe.Lock) {
	h, err := leader.NewHealth(StoppedTolerance)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln, h)
	go func(parent int) { // end with the test that started this process
		for range time.Tick(100 * time.Millisecond) {
			if os.Getppid() != parent {
				os.Exit(1)
			}
		}
	}(os.Getppid())
	err = leader.Run(context.Background(), lock, func(context.Context, fence.Token) error {
		fmt.Printf("leading http://%s/\n", ln.Addr())
		select {} // ignores its context: a leader that does not stop
	}, leader.WithHealth(h), leader.WithLogger(slog.New(slog.DiscardHandler)))
	t.Fatalf("leader.Run returned: %v", err)
}
