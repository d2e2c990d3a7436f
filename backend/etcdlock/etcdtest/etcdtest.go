// Package etcdtest starts real etcd servers for tests and programs:
// package etcdlock's tests, those of code built on it, and cmd/zkbench.
// Tests never mock etcd and never skip when no server can be had: they
// fail with InstallHint. It has the face of every server harness of this
// repository:
//
//   - Launch(ctx) for programs, which Close the server themselves;
//   - Start(tb) for tests: the test fails at once with InstallHint when no
//     server can be had, and the server is closed at the test's cleanup;
//   - Shared(tb): one server for the whole test binary, stopped by Main (or
//     StopShared); each test keeps to a key prefix of its own (Prefix);
//   - ETCD_TEST_ENDPOINTS (EnvEndpoints), the one environment variable that
//     names an existing server to use instead.
//
// Where a server comes from, in this order:
//
//  1. ETCD_TEST_ENDPOINTS=host:port,... names a running server. Launch
//     checks that each endpoint answers /health as a healthy member (else
//     its error wraps ErrNoServer and names the variable); then it is used
//     as it is: Kill and Restart return ErrUnsupported. Give each test its
//     own key prefix (Prefix) so that tests can share it.
//  2. The etcd binary (ETCD_BIN, else etcd on PATH, as Debian's etcd-server
//     package installs it): one member on two free 127.0.0.1 ports (client
//     and peer) with its data in a temporary directory, retried on fresh
//     ports when another process took one first. It is started with
//     serverkit.StartChild: on Linux it dies with the test binary even if the
//     binary crashes.
//
// Whatever Start launches is gone when the test ends (process killed and
// reaped, directory removed); the server of Shared is stopped by Main.
package etcdtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/lazy"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// EnvEndpoints names a running etcd server (comma-separated host:port) to
// use instead of starting one.
const EnvEndpoints = "ETCD_TEST_ENDPOINTS"

// EnvBinary is the path of the etcd binary to start (default: etcd on PATH).
const EnvBinary = "ETCD_BIN"

// InstallHint tells a person how to make an etcd server available to the
// tests. It is part of every error that reports that none could be had.
const InstallHint = "install etcd: sudo apt-get install -y etcd-server (scripts/setup.sh does it), " +
	"or set ETCD_BIN to an etcd binary, or set ETCD_TEST_ENDPOINTS=host:port to use a running server"

var (
	// ErrNoServer is wrapped by the error of Launch when no server could be
	// started or reached; the message holds InstallHint and the reason.
	ErrNoServer = errors.New("etcdtest: no etcd server available")
	// ErrUnsupported is wrapped by the errors of Kill and Restart on a
	// server named by ETCD_TEST_ENDPOINTS, which can't be controlled.
	ErrUnsupported = errors.New("etcdtest: operation not supported on an external server")
)

const (
	// launchTimeout bounds how long Launch waits for a local server to
	// answer, retries after port clashes included.
	launchTimeout = 60 * time.Second
	// externalTimeout bounds Launch's check of the server of
	// ETCD_TEST_ENDPOINTS.
	externalTimeout = 10 * time.Second
)

// Server is one etcd server for tests. Its methods are safe for concurrent
// use.
type Server struct {
	endpoints []string
	external  bool

	bin, dir           string
	clientPort, peerPt int
	certs              *certtest.Files // nil: plain; else TLS with client certificates (tls.go)

	mu   sync.Mutex
	proc *process // nil while killed
}

// process is one run of the server binary.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd.Wait returned
	log    *os.File
}

// Launch starts a server, or names the one of ETCD_TEST_ENDPOINTS once
// every endpoint listed reports itself healthy. The caller must Close it.
// ctx bounds the startup (at most a minute). The error wraps ErrNoServer
// and holds InstallHint when none could be had.
func Launch(ctx context.Context) (*Server, error) {
	if env := strings.TrimSpace(os.Getenv(EnvEndpoints)); env != "" {
		s, err := external(ctx, env)
		if err != nil {
			return nil, fmt.Errorf("%w: %s=%s: %v; %s", ErrNoServer, EnvEndpoints, env, err, InstallHint)
		}
		return s, nil
	}
	return launchLocal(ctx, false)
}

// launchLocal starts the etcd binary, serving TLS with client certificates
// (certificates generated in its directory) when secure.
func launchLocal(ctx context.Context, secure bool) (*Server, error) {
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("etcd"); err != nil {
			return nil, fmt.Errorf("%w: %v; %s", ErrNoServer, err, InstallHint)
		}
	}
	dir, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoServer, err)
	}
	s := &Server{bin: bin, dir: dir}
	if s.certs, err = certtest.GenerateIn(dir, secure); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("%w: %v", ErrNoServer, err)
	}
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, launchTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		ports, err := serverkit.FreePorts(2)
		if err == nil {
			s.clientPort, s.peerPt = ports[0], ports[1]
			s.endpoints = []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(s.clientPort))}
			err = s.start(ctx)
		}
		if err == nil {
			return s, nil
		}
		serverkit.ReleasePorts(s.clientPort, s.peerPt)
		if errors.Is(outer.Err(), context.Canceled) { // interrupted: not a missing install
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("etcdtest: start interrupted (%w: %v): %v", outer.Err(), context.Cause(outer), err)
		}
		if attempt == 5 || ctx.Err() != nil || !errors.Is(err, errPortTaken) {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("%w: %v; %s", ErrNoServer, err, InstallHint)
		}
		// Another process took a port between serverkit.FreePorts and the
		// bind: the member never started, so its data directory holds
		// nothing useful.
		_ = os.RemoveAll(filepath.Join(dir, "data"))
	}
}

// external names the running server of ETCD_TEST_ENDPOINTS (list), once
// each of its endpoints has answered /health with a healthy member, within
// externalTimeout: an endpoint that does not answer fails at once.
func external(ctx context.Context, list string) (*Server, error) {
	s := &Server{external: true}
	for _, ep := range strings.Split(list, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			s.endpoints = append(s.endpoints, ep)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, externalTimeout)
	defer cancel()
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	for _, ep := range s.endpoints {
		if err := health(ctx, hc, "http://"+ep); err != nil {
			return nil, fmt.Errorf("%s: %w", ep, err)
		}
	}
	return s, nil
}

// Start launches a server for the test and closes it at the test's cleanup,
// failing the test (with InstallHint) when none can be had.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := Launch(context.Background())
	if err != nil {
		tb.Fatalf("etcdtest.Start: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("etcdtest: closing the server: %v", err)
		}
	})
	return s
}

var shared lazy.Shared[*Server]

// Shared returns the test binary's shared server, launching it on first use.
// Tests that share it must keep to their own key prefixes (Prefix) and must
// not Kill or Restart it. Main stops it after the tests. When no server can
// be had the test fails at once with InstallHint, and later calls fail the
// same way without retrying.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	return shared.Get(tb, "etcdtest.Shared", launchShared)
}

func launchShared() (*Server, error) { return Launch(context.Background()) }

func sharedServer() (*Server, error) { return shared.Load(launchShared) }

// ExampleURL returns an etcd:// URL of the Shared server with a key prefix
// that no other caller gets, for Example functions (which have no
// testing.TB). It panics, with InstallHint, when no server can be had. The
// example must leave no key behind (release its leases, close its Session).
func ExampleURL() string {
	s, err := sharedServer()
	if err != nil {
		panic(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return s.URL("/etcdtest/example-" + hex.EncodeToString(b[:]))
}

// Main is for TestMain: func TestMain(m *testing.M) { etcdtest.Main(m) }.
// It runs the tests with serverkit.MainThen (which stops the thread that
// started the servers and, if the tests passed, checks with goleak that no
// goroutine is left) and stops the Shared server after them. A test binary
// that also uses other servers' harnesses (redistest, pgtest, ...) calls
// serverkit.MainThen itself (zktest.MainThen, when one is zktest), with
// StopShared in its cleanup.
func Main(m *testing.M) { serverkit.MainThen(m, StopShared) }

// StopShared stops the Shared server, if one was launched; a later Shared
// launches a new one. It is for a TestMain that calls serverkit.MainThen
// itself: serverkit.MainThen(m, etcdtest.StopShared).
func StopShared() {
	shared.StopOrWarn(nil, "etcdtest: stopping the shared server")
	stopSharedTLS()
}

// Endpoints returns the client endpoints (host:port).
func (s *Server) Endpoints() []string { return append([]string(nil), s.endpoints...) }

// URL returns the etcd:// URL of the server (etcds:// for a server of
// LaunchTLS) with the key prefix prefix ("" for none; a leading "/" is
// added when missing), as etcdlock.Connect parses it.
func (s *Server) URL(prefix string) string {
	return s.scheme() + "://" + strings.Join(s.endpoints, ",") + urlPath(prefix)
}

// urlPath is prefix as the path of an etcd:// URL: with a leading "/",
// unless empty.
func urlPath(prefix string) string {
	if prefix != "" && !strings.HasPrefix(prefix, "/") {
		return "/" + prefix
	}
	return prefix
}

// Client opens a client of the server for the test (an inspector that does
// not go through any fault proxy) and closes it at the test's cleanup.
func (s *Server) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: s.endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop(), TLS: s.ClientTLS()})
	if err != nil {
		tb.Fatalf("etcdtest: client: %v", err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Prefix returns a key prefix of the form "/etcdtest/<random>" that no other
// test uses, and deletes every key under it at the test's cleanup.
func Prefix(tb testing.TB, s *Server) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	p := "/etcdtest/" + hex.EncodeToString(b[:])
	cli := s.Client(tb)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := cli.Delete(ctx, p+"/", clientv3.WithPrefix()); err != nil {
			tb.Errorf("etcdtest: deleting the keys under %s: %v", p, err)
		}
	})
	return p
}

// Kill kills the server process (SIGKILL) and waits for it to end, keeping
// its data; Restart starts it again. It is a no-op on a killed server.
func (s *Server) Kill() error {
	if s.external {
		return fmt.Errorf("kill: %w", ErrUnsupported)
	}
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.kill()
	}
	return nil
}

// Restart kills the server (if it runs) and starts it again on the same
// ports with the same data, returning when it answers.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Kill(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, launchTimeout)
	defer cancel()
	for {
		err := s.start(ctx)
		if err == nil || !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond) // the old socket may linger an instant
	}
}

// Close kills the server and removes its data directory. It is idempotent.
func (s *Server) Close() error {
	if s.external {
		return nil
	}
	_ = s.Kill()
	serverkit.ReleasePorts(s.clientPort, s.peerPt)
	return os.RemoveAll(s.dir)
}

// errPortTaken means the server could not bind one of its ports.
var errPortTaken = errors.New("etcdtest: port already in use")

// start runs the binary on the chosen ports and waits until it is healthy.
func (s *Server) start(ctx context.Context) error {
	client := s.httpScheme() + "://" + s.endpoints[0]
	peer := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.peerPt))
	logPath := filepath.Join(s.dir, "etcd.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin,
		"--name", "etcdtest",
		"--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "etcdtest="+peer, "--initial-cluster-state", "new",
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn",
	)
	cmd.Args = append(cmd.Args, s.tlsFlags()...)
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := serverkit.StartChild(cmd); err != nil {
		_ = logf.Close()
		return err
	}
	p := &process{cmd: cmd, exited: make(chan struct{}), log: logf}
	go func() { _ = cmd.Wait(); close(p.exited) }()

	if err := waitHealthy(ctx, client, s.ClientTLS(), p.exited); err != nil {
		p.kill()
		tail := logTail(logPath)
		if strings.Contains(tail, "address already in use") {
			return fmt.Errorf("%w: %v", errPortTaken, err)
		}
		return fmt.Errorf("etcd on %s: %v; log:\n%s", s.endpoints[0], err, tail)
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

// kill ends the process group and waits for the process.
func (p *process) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	_ = p.log.Close()
}

// serverEnv is the test binary's environment without ETCD_* variables, which
// etcd would read as flags.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			env = append(env, kv)
		}
	}
	return env
}

// logTail returns the end of the server's log, for error messages.
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
