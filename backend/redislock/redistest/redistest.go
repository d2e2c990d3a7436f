// Package redistest provides real Redis servers to tests and programs:
// never a mock, and never a skipped test when none can be had (the test
// fails with InstallHint). It has the face of every server harness of this
// repository:
//
//   - Launch(ctx, opts...) for programs (cmd/zkbench), which Close the
//     server themselves;
//   - Start(tb, opts...) for tests: the test fails at once with
//     InstallHint when no server can be had, and the server is closed at
//     the test's cleanup;
//   - REDIS_TEST_ADDR=host:port (EnvAddr), the one environment variable
//     that names an existing server to use instead: each Server then gets
//     its own key prefix (KeyPrefix), whose keys Close deletes; Kill and
//     Restart return ErrUnsupported on it, so the tests that use them fail.
//
// A server is so cheap to start that tests take one each: there is no
// Shared, except the one server of ExampleURL for Example functions.
//
// Launch runs redis-server (Debian package redis-server) on a free
// 127.0.0.1 port in a temporary directory, as a child that dies with the
// test binary or program (serverkit.StartChild), configured for durable locks:
// an append-only file fsynced before every reply (appendonly yes,
// appendfsync always) and no snapshots. Kill and Close end the server's
// whole process family, the children it forks (an AOF rewrite, a
// replica's sync) included, before they return.
//
// A test binary using it ends with Main in TestMain (or serverkit.Main, if it
// uses no ExampleURL):
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// EnvAddr names the environment variable that points redistest at an
// existing server (host:port) instead of starting one.
const EnvAddr = "REDIS_TEST_ADDR"

// InstallHint tells a person how to make a Redis server available. It is
// part of every error that wraps ErrNoServer.
const InstallHint = "install Redis: apt-get install -y redis-server (or make setup), or set " + EnvAddr + "=host:port to use an existing server"

var (
	// ErrNoServer is wrapped by the error of Launch when no server could be
	// started or reached; the message holds InstallHint and the reason.
	ErrNoServer = errors.New("redistest: no Redis server available")
	// ErrUnsupported is wrapped by the errors of Kill and Restart on the
	// server named by REDIS_TEST_ADDR, which can't be controlled.
	ErrUnsupported = errors.New("redistest: operation not supported on an external server")
)

const (
	// readyTimeout bounds how long a started server may take to answer PING.
	readyTimeout = 20 * time.Second
	// goneTimeout bounds how long a killed server's processes may take to end.
	goneTimeout = 10 * time.Second
)

// Server is one Redis server: started by redistest, or the existing one
// named by REDIS_TEST_ADDR. Its methods are safe for concurrent use.
type Server struct {
	addr     string
	port     int // reserved (serverkit.FreePorts) until Close
	dir      string
	args     []string
	prefix   string
	external bool
	certs    *certtest.Files // nil: plain; else TLS only, client certificates required (tls.go)

	mu   sync.Mutex
	proc *process // nil while killed
}

// process is one run of redis-server and the processes it forks.
type process struct {
	cmd  *exec.Cmd
	gone chan struct{} // closed when cmd and every process it forked have ended
}

// Option configures Launch and Start.
type Option func(*[]string)

// WithoutPersistence starts the server with no append-only file and no
// snapshots: a killed server comes back empty. For tests that show what
// that costs.
func WithoutPersistence() Option {
	return func(args *[]string) { *args = append(*args, "--appendonly", "no") }
}

// WithArgs adds redis-server command-line arguments, e.g. "--replicaof",
// "127.0.0.1", "6379".
func WithArgs(args ...string) Option {
	return func(a *[]string) { *a = append(*a, args...) }
}

// Launch starts a server (or names the one of REDIS_TEST_ADDR, once it
// answers PING); the caller must Close it. ctx bounds the startup. The
// error wraps ErrNoServer and holds InstallHint when no server can be had.
func Launch(ctx context.Context, opts ...Option) (*Server, error) {
	return launchOrExplain(ctx, opts, false, false, InstallHint)
}

// LaunchLocal is Launch that always starts a redis-server of its own, even
// when REDIS_TEST_ADDR is set: for callers that kill, freeze or flood the
// server (a fault-injection run), which must never do that to someone
// else's. The error wraps ErrNoServer and holds LocalInstallHint when no
// server can be started.
func LaunchLocal(ctx context.Context, opts ...Option) (*Server, error) {
	return launchOrExplain(ctx, opts, false, true, LocalInstallHint)
}

// LocalInstallHint is InstallHint for LaunchLocal, which ignores
// REDIS_TEST_ADDR.
const LocalInstallHint = "install Redis: apt-get install -y redis-server (or make setup); " + EnvAddr + " is not used: this server must be one started here (it is faulted, or serves TLS)"

// launchOrExplain launches a server (launch's secure and own). A
// failure is ErrNoServer with hint, unless ctx was cancelled: an
// interrupted start is not a missing install, so its error wraps ctx's
// error (and cause) instead.
func launchOrExplain(ctx context.Context, opts []Option, secure, own bool, hint string) (*Server, error) {
	s, err := launch(ctx, opts, secure, own)
	switch {
	case err == nil:
		return s, nil
	case errors.Is(ctx.Err(), context.Canceled):
		return nil, fmt.Errorf("redistest: start interrupted (%w: %v): %v", ctx.Err(), context.Cause(ctx), err)
	}
	return nil, fmt.Errorf("%w: %v; %s", ErrNoServer, err, hint)
}

// Start launches a server for the test and closes it at the test's
// cleanup (stopped and its directory removed, or, on an external server,
// its keys deleted). When none can be had the test fails at once, with
// InstallHint.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s, err := Launch(context.Background(), opts...)
	if err != nil {
		tb.Fatalf("redistest.Start: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("redistest: closing the server: %v", err)
		}
	})
	return s
}

// launch starts (or names) a server; secure makes it a TLS one (tls.go);
// own or secure always starts one from the binary (never REDIS_TEST_ADDR's).
func launch(ctx context.Context, opts []Option, secure, own bool) (*Server, error) {
	prefix := "zkrecipes-test:" + rand.Text()[:12] + ":"
	if addr := os.Getenv(EnvAddr); addr != "" && !secure && !own {
		s := &Server{addr: addr, prefix: prefix, external: true}
		if err := ping(addr, nil, 10*time.Second); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", EnvAddr, addr, err)
		}
		return s, nil
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	var extra []string
	for _, o := range opts {
		o(&extra)
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	certs, err := certtest.GenerateIn(dir, secure)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		ports, err := serverkit.FreePorts(1)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		port := ports[0]
		s := &Server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port: port, dir: dir, prefix: prefix, certs: certs}
		s.args = append([]string{bin}, s.portArgs(port)...)
		s.args = append(append(s.args, "--bind", "127.0.0.1", "--dir", dir,
			"--daemonize", "no", "--protected-mode", "no", "--save", "",
			"--appendonly", "yes", "--appendfsync", "always",
			"--logfile", filepath.Join(dir, "redis.log"),
		), extra...)
		err = s.start(ctx)
		if err == nil {
			return s, nil
		}
		serverkit.ReleasePorts(port)
		if attempt < 4 && ctx.Err() == nil && strings.Contains(s.LogTail(5), "Address already in use") {
			continue // another process took the port between FreePorts and the bind
		}
		_ = os.RemoveAll(dir)
		return nil, err
	}
}

// start runs the server and waits until it answers PING, for up to
// readyTimeout or until ctx ends.
func (s *Server) start(ctx context.Context) error {
	p, err := spawn(s.args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		err := ping(s.addr, s.clientTLS(), time.Second)
		if err == nil {
			s.mu.Lock()
			s.proc = p
			s.mu.Unlock()
			return nil
		}
		select {
		case <-p.gone:
			return fmt.Errorf("redistest: redis-server exited at start: %v\n%s", err, s.LogTail(20))
		case <-ctx.Done():
			_ = p.kill()
			return fmt.Errorf("redistest: redis-server not ready (%v): %v\n%s", ctx.Err(), err, s.LogTail(20))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// spawn starts redis-server (args[0]) in a process group of its own, with
// the write end of a pipe as its file 3, a lifeline: redis-server closes no
// file it inherits, so every process it forks holds the lifeline too, and
// the read end sees EOF once the last of them has ended. Reaping
// redis-server is not enough: a child it forked (an AOF rewrite, an RDB
// save) outlives its SIGKILL and keeps writing into its directory.
func spawn(args []string) (*process, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.ExtraFiles = []*os.File{w}
	err = serverkit.StartChild(cmd)
	_ = w.Close()
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("redistest: starting redis-server: %w", err)
	}
	p := &process{cmd: cmd, gone: make(chan struct{})}
	go func() {
		_, _ = io.Copy(io.Discard, r) // returns at EOF: the last holder ended
		_ = r.Close()
		_ = cmd.Wait()
		close(p.gone)
	}()
	return p, nil
}

// kill sends SIGKILL to the process group (redis-server and its children)
// and waits until all of them have ended.
func (p *process) kill() error {
	select {
	case <-p.gone:
		return nil // nothing left, and the group's ID may be reused
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.gone:
		return nil
	case <-time.After(goneTimeout):
		return fmt.Errorf("redistest: redis-server %d or a process it forked still runs %v after SIGKILL", p.cmd.Process.Pid, goneTimeout)
	}
}

// External reports whether s is the server named by REDIS_TEST_ADDR, which
// redistest did not start and can't kill, pause or restart.
func (s *Server) External() bool { return s.external }

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.addr }

// URL returns the server's address as a redis:// URL (database 0), or a
// rediss:// one for a server of LaunchTLS.
func (s *Server) URL() string { return s.scheme() + "://" + s.addr + "/0" }

// KeyPrefix returns a key prefix of this Server's own (e.g. for
// redislock.WithKeyPrefix): on an external server its keys are deleted at
// cleanup.
func (s *Server) KeyPrefix() string { return s.prefix }

// Client returns a direct client of the server (no proxy), closed at tb's
// cleanup: for inspecting and tampering with keys.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.addr, ContextTimeoutEnabled: true, TLSConfig: s.clientTLS()})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill kills the server with SIGKILL, with the processes it forked (as a
// crash or power loss would, minus the disk's own cache), and waits until
// all of them have ended, keeping its directory; Restart starts it again.
// It is a no-op on a killed server. On the server of REDIS_TEST_ADDR it
// returns an error wrapping ErrUnsupported.
func (s *Server) Kill() error {
	if s.external {
		return fmt.Errorf("kill %s (%s): %w", s.addr, EnvAddr, ErrUnsupported)
	}
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.kill()
}

// Restart kills the server (if it runs) and starts it again on the same
// port and directory, where it reads back its append-only file; it returns
// when the server answers PING, within ctx and at most readyTimeout (20 s).
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Kill(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return s.start(ctx)
}

// Close stops a server redistest started and removes its directory, or
// deletes this Server's keys from an external one. It may be called again.
func (s *Server) Close() error {
	if !s.external {
		if err := s.Kill(); err != nil {
			return err
		}
		serverkit.ReleasePorts(s.port)
		return os.RemoveAll(s.dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: s.addr})
	defer c.Close()
	iter := c.Scan(ctx, 0, s.prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		if err := c.Del(ctx, iter.Val()).Err(); err != nil {
			return fmt.Errorf("deleting %s: %w", iter.Val(), err)
		}
	}
	return iter.Err()
}

// LogTail returns the last n lines of the server's log ("" for an external
// server).
func (s *Server) LogTail(n int) string {
	if s.dir == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// ping sends PING over a plain connection, or a TLS one with tlsCfg when
// not nil (no client library, no retries), and expects +PONG.
func ping(addr string, tlsCfg *tls.Config, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	if tlsCfg != nil {
		c = tls.Client(c, tlsCfg)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

var example struct {
	mu  sync.Mutex
	srv *Server
}

// ExampleURL returns the URL of a server for runnable Example functions,
// which have no testing.TB: started on first use and stopped by Main (or
// StopShared). It panics, with InstallHint, when no server can be had.
func ExampleURL() string {
	example.mu.Lock()
	defer example.mu.Unlock()
	if example.srv == nil {
		s, err := Launch(context.Background())
		if err != nil {
			panic(err)
		}
		example.srv = s
	}
	return example.srv.URL()
}

// Main is for TestMain: func TestMain(m *testing.M) { redistest.Main(m) }.
// It runs the tests with serverkit.MainThen (child processes stopped,
// goroutines checked with goleak) and StopShared after them. A test binary
// that also uses other harnesses' shared servers calls serverkit.MainThen
// itself, with each harness's StopShared in its cleanup.
func Main(m *testing.M) { serverkit.MainThen(m, StopShared) }

// StopShared stops the server of ExampleURL, if one was started; a later
// ExampleURL launches a new one.
func StopShared() {
	example.mu.Lock()
	defer example.mu.Unlock()
	if example.srv != nil {
		if err := example.srv.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "redistest: stopping the example server: %v\n", err)
		}
		example.srv = nil
	}
	stopSharedTLS()
}
