package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// bin is the zkrecipes binary built by TestMain.
var bin string

func TestMain(m *testing.M) {
	// The tests spend their time waiting (for commands, servers, sessions
	// and leases), not computing: up to 4 run at once (go test -parallel
	// still wins), not GOMAXPROCS (2 on the project's machines), which made
	// this package the longest of make test. Not more: each runs
	// zkrecipes processes on 2 s sessions.
	if err := flag.Set("test.parallel", "4"); err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "zkrecipes-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "zkrecipes")
	args := []string{"build", "-o", bin}
	// The zkrecipes processes are built without the race detector unless
	// ZKRECIPES_CLI_RACE is set: race-built, they cost this package 74 of
	// its 164 CPU-s (make test was over its 8 minutes), and the recipes they
	// run are race-tested in their own packages; this package's own code
	// runs under -race in-process.
	if raceEnabled && os.Getenv("ZKRECIPES_CLI_RACE") != "" {
		args = append(args, "-race")
	}
	// go test puts its own GOROOT/bin first in the PATH it gives the test:
	// "go" is the toolchain running the test.
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// One MainThen for every server harness of these tests: zktest's
	// ZooKeeper and the redistest servers (which zktest starts), the
	// Shared servers of etcdtest, pgtest and k8stest.
	zktest.MainThen(m, func() {
		etcdtest.StopShared()
		pgtest.StopShared()
		redistest.StopShared() // its SharedTLS server
		k8stest.StopShared()
		os.RemoveAll(dir)
	})
}

// syncBuffer is a bytes.Buffer safe for one writer and many readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is one zkrecipes process.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	stderr *syncBuffer // JSON log lines
	stdout *syncBuffer
	lines  chan string // stdout lines, when started by startProc with lines
	done   chan struct{}
	code   int
}

// start runs zkrecipes with args (JSON logs at debug level on stderr) in
// dir, with ZK_SERVERS pointing at cl (if not nil). It is killed at the
// test's cleanup if still running.
func start(t testing.TB, cl *zktest.Cluster, dir string, args ...string) *proc {
	t.Helper()
	return startProc(t, cl, dir, false, args...)
}

func startProc(t testing.TB, cl *zktest.Cluster, dir string, lines bool, args ...string) *proc {
	t.Helper()
	servers := ""
	if cl != nil {
		servers = strings.Join(cl.Servers(), ",")
	}
	return startServers(t, servers, dir, lines, args...)
}

// startOn runs zkrecipes as start does, with ZK_SERVERS=servers (e.g. the
// URL of another backend).
func startOn(t testing.TB, servers, dir string, args ...string) *proc {
	t.Helper()
	return startServers(t, servers, dir, false, args...)
}

func startServers(t testing.TB, servers, dir string, lines bool, args ...string) *proc {
	t.Helper()
	return startEnv(t, []string{"ZK_SERVERS=" + servers}, dir, lines, args...)
}

// startEnv runs zkrecipes as start does, with env added to the test's
// environment.
func startEnv(t testing.TB, env []string, dir string, lines bool, args ...string) *proc {
	t.Helper()
	if len(args) > 0 && args[0] != "--help" {
		args = append([]string{args[0], "--log-format", "json", "--log-level", "debug"}, args[1:]...)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	p := &proc{t: t, cmd: cmd, stderr: &syncBuffer{}, stdout: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	var pr io.ReadCloser
	if lines {
		var err error
		if pr, err = cmd.StdoutPipe(); err != nil {
			t.Fatal(err)
		}
		p.lines = make(chan string, 100)
	} else {
		cmd.Stdout = p.stdout
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	scanned := make(chan struct{})
	if lines {
		go func() {
			defer close(scanned)
			defer close(p.lines)
			sc := bufio.NewScanner(pr)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				p.lines <- sc.Text()
			}
		}()
	}
	go func() {
		if lines {
			<-scanned // StdoutPipe: read everything before Wait
		}
		cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			if t.Failed() {
				t.Logf("zkrecipes %q exited %d; log:\n%s", scrubbed(args, args, env), p.code, scrubbed([]string{p.stderr.String()}, args, env)[0])
			}
		default:
			cmd.Process.Kill()
			<-p.done
			t.Logf("killed at cleanup: zkrecipes %q\n%s", scrubbed(args, args, env), scrubbed([]string{p.stderr.String()}, args, env)[0])
		}
	})
	return p
}

// scrubbed returns texts with the passwords of args and of env's values
// (a --servers or ZK_SERVERS URL with one) taken out, as the CLI takes them
// out of its own log (hide), for a test's log of a run.
func scrubbed(texts, args, env []string) []string {
	out := slices.Clone(texts)
	for _, a := range append(slices.Clone(args), env...) {
		if k, v, ok := strings.Cut(a, "="); ok && !strings.Contains(k, "/") {
			a = v // an environment variable's value, or a --flag=value
		}
		for i := range out {
			out[i] = hide(a, out[i])
		}
	}
	return out
}

// wait returns the exit status, failing the test if the process is still
// running after d.
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		p.t.Fatalf("zkrecipes %q still running after %v; log and goroutines:\n%s", p.cmd.Args[1:], d, p.dump())
		return 0
	}
}

// expect waits for the exit status want.
func (p *proc) expect(want int, d time.Duration) {
	p.t.Helper()
	if got := p.wait(d); got != want {
		p.t.Fatalf("zkrecipes %q exited %d, want %d; log:\n%s", p.cmd.Args[1:], got, want, p.stderr)
	}
}

// logs returns the JSON log records.
func (p *proc) logs() []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(p.stderr.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil {
			out = append(out, rec)
		}
	}
	return out
}

// logged returns the first log record with message msg (nil if none).
func (p *proc) logged(msg string) map[string]any {
	for _, r := range p.logs() {
		if r["msg"] == msg {
			return r
		}
	}
	return nil
}

// awaitLog waits until msg is logged (and fails if the process exits
// first or 20 s pass).
func (p *proc) awaitLog(msg string) map[string]any {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if r := p.logged(msg); r != nil {
			return r
		}
		select {
		case <-p.done:
			if r := p.logged(msg); r != nil {
				return r
			}
			p.t.Fatalf("zkrecipes %q exited %d before logging %q; log:\n%s", p.cmd.Args[1:], p.code, msg, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.t.Fatalf("zkrecipes %q did not log %q within 20 s; log and goroutines:\n%s", p.cmd.Args[1:], msg, p.dump())
	return nil
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// readLines returns the lines of a file the children append to.
func readLines(t testing.TB, name string) []string {
	t.Helper()
	b, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	text := strings.TrimSpace(string(b))
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// awaitFile waits until name exists.
func awaitFile(t testing.TB, name string) {
	t.Helper()
	serverkit.Eventually(t, 20*time.Second, "file "+name, func() bool {
		_, err := os.Stat(name)
		return err == nil
	})
}

// touch creates name.
func touch(t testing.TB, name string) {
	t.Helper()
	if err := os.WriteFile(name, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// gateScript waits for the file gate to exist.
func gateScript(gate string) string {
	return fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done", gate)
}

// alive reports whether process pid exists (not reaped).
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// readPid reads a pid a child wrote.
func readPid(t testing.TB, name string) int {
	t.Helper()
	awaitFile(t, name)
	var pid int
	serverkit.Eventually(t, 5*time.Second, "a pid in "+name, func() bool {
		b, _ := os.ReadFile(name)
		_, err := fmt.Sscan(string(b), &pid)
		return err == nil && pid > 0
	})
	return pid
}

var osHostname = os.Hostname

// awaitLines waits until the file name has at least n lines.
func awaitLines(t testing.TB, name string, n int) {
	t.Helper()
	serverkit.Eventually(t, 20*time.Second, fmt.Sprintf("%d lines in %s", n, name), func() bool {
		return len(readLines(t, name)) >= n
	})
}

// dump makes a process that is still running print its goroutines
// (SIGQUIT) and returns its log: for diagnosing a process that hangs.
func (p *proc) dump() string {
	select {
	case <-p.done:
	default:
		p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	}
	return p.stderr.String()
}
