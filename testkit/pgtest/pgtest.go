// Package pgtest starts throwaway PostgreSQL servers, as zktest does for
// ZooKeeper: a fresh cluster made with initdb in a temporary directory,
// served by a postgres child process on a free loopback port, and removed
// on Close. It has the face of every server harness of this repository:
//
//   - Launch(ctx) for programs (cmd/zkbench, cmd/nemesis), which Close the
//     server themselves;
//   - Start(tb) for tests: the test fails at once with InstallHint when no
//     server can be had (never a skip), and the server is closed at the
//     test's cleanup;
//   - Shared(tb): one server for the whole test binary, stopped by Main (or
//     StopShared); each test takes a database of its own with Database,
//     or, cheaper, a schema of its own with Schema;
//   - PG_TEST_DSN (EnvDSN), the one environment variable that names an
//     existing server to use instead (its role needs CREATEDB: every test
//     gets a database of its own). Restart then fails: it needs a server
//     of pgtest's own.
//
// LaunchBouncer and StartBouncer put a PgBouncer in front of a server.
//
// The server binaries come from Debian's postgresql package
// (/usr/lib/postgresql/<version>/bin, newest first) or PATH. A process
// running as root runs them as the postgres user, since PostgreSQL refuses to
// run as root.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// EnvDSN names the environment variable that points pgtest at an existing
// server, e.g. postgres://me@127.0.0.1:5432/postgres?sslmode=disable.
const EnvDSN = "PG_TEST_DSN"

// InstallHint tells a person how to make a PostgreSQL server available. It
// is part of every error that wraps ErrNoServer.
const InstallHint = "install PostgreSQL (apt-get install -y postgresql, or make setup) or set " + EnvDSN + " to an existing server"

// ErrNoServer is wrapped by the errors of Launch and LaunchBouncer when no
// server could be started or reached; the message holds the install hint
// and the reason.
var ErrNoServer = errors.New("pgtest: no PostgreSQL server available")

// readyTimeout bounds initdb plus the first successful connection.
const readyTimeout = 60 * time.Second

// Server is one PostgreSQL server: started by pgtest, or the existing one
// named by PG_TEST_DSN.
type Server struct {
	admin string // DSN of the maintenance database, as a superuser or a CREATEDB role
	dir   string // data and socket directory; "" for an existing server
	bin   string // directory of the server binaries
	cred  *syscall.Credential
	cmd   *exec.Cmd
	exit  chan struct{} // closed when cmd has been waited for
	port  int
	certs *certtest.Files // nil: plain; else TLS with client certificates only (tls.go)

	fmu    sync.Mutex // guards paused
	paused []int      // the processes Pause stopped (faults.go), postmaster first
}

// DSN returns the address of the server's maintenance database
// (postgres://…/postgres?sslmode=disable for a started server).
func (s *Server) DSN() string { return s.admin }

// Port returns the server's TCP port on 127.0.0.1 (0 for an existing server
// named by PG_TEST_DSN).
func (s *Server) Port() int { return s.port }

// Launch starts a new server, or returns the one named by PG_TEST_DSN once
// it answers; the caller must Close it. ctx bounds the startup. The error
// wraps ErrNoServer and holds InstallHint when no server can be had.
func Launch(ctx context.Context) (*Server, error) { return launchAs(ctx, false) }

// LaunchLocal is Launch without PG_TEST_DSN: it always starts a server of
// its own, for tests that restart, pause or terminate it (the nemesis),
// which must never hit a server someone else named.
func LaunchLocal(ctx context.Context) (*Server, error) { return launchAs(ctx, true) }

// launchAs is Launch, or LaunchLocal when local, with their errors.
func launchAs(ctx context.Context, local bool) (*Server, error) {
	s, err := launchServer(ctx, false, local)
	switch {
	case err == nil:
		return s, nil
	case errors.Is(ctx.Err(), context.Canceled): // interrupted: not a missing install (a deadline keeps ErrNoServer: no server in time)
		return nil, fmt.Errorf("pgtest: start interrupted (%w: %v): %v", ctx.Err(), context.Cause(ctx), err)
	}
	return nil, fmt.Errorf("%w: %v; %s", ErrNoServer, err, InstallHint)
}

// Start launches a server for the test and closes it at the test's
// cleanup. When none can be had the test fails at once, with InstallHint.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := Launch(context.Background())
	if err != nil {
		tb.Fatalf("pgtest.Start: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("pgtest: closing the server: %v", err)
		}
	})
	return s
}

// launch starts (or names) a server; secure makes it a TLS one (tls.go),
// always started from the binaries, as is a local one.
func launch(ctx context.Context, secure bool) (*Server, error) {
	return launchServer(ctx, secure, secure)
}

// launchServer starts a server, TLS if secure; unless local, PG_TEST_DSN's
// server is used when set.
func launchServer(ctx context.Context, secure, local bool) (*Server, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" && !local {
		s := &Server{admin: dsn}
		if err := s.waitReady(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvDSN, err)
		}
		return s, nil
	}
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	cred, err := credential(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", superuser(secure),
		"-A", "trust", "-E", "UTF8", "--no-sync", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %v: %s", err, lastLines(string(out), 5))
	}
	certs, err := secureCluster(dir, data, cred, secure)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		s, err := startOnce(ctx, bin, dir, cred, certs)
		if err == nil || attempt == 3 || ctx.Err() != nil {
			if err != nil {
				os.RemoveAll(dir)
			}
			return s, err
		}
	}
}

// startOnce runs postgres on a free port and waits until it answers.
func startOnce(ctx context.Context, bin, dir string, cred *syscall.Credential, certs *certtest.Files) (*Server, error) {
	ports, err := serverkit.FreePorts(1)
	if err != nil {
		return nil, err
	}
	port := ports[0]
	s := &Server{
		admin: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		dir:   dir, bin: bin, cred: cred, port: port, certs: certs,
	}
	if certs != nil {
		s.admin = tlsDSN(port, certs)
	}
	if err := s.run(ctx); err != nil {
		serverkit.ReleasePorts(port)
		return nil, err
	}
	return s, nil
}

// run starts postgres on s.port and waits until it answers.
func (s *Server) run(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.dir, "data"),
		"-p", strconv.Itoa(s.port), "-k", s.dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "shared_buffers=32MB")
	cmd.Args = append(cmd.Args, s.tlsArgs()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if err := serverkit.StartChild(cmd); err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	exit := make(chan struct{})
	s.cmd, s.exit = cmd, exit
	go func() { cmd.Wait(); close(exit) }()
	if err := s.waitReady(ctx); err != nil {
		s.stop()
		b, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
		return fmt.Errorf("%w\n%s", err, lastLines(string(b), 10))
	}
	return nil
}

// Restart stops a started server and starts it again on the same port and
// data: with crash, an immediate shutdown (SIGQUIT: every session is cut at
// once, no checkpoint, crash recovery at start, as after a server crash);
// otherwise a fast shutdown (SIGINT). Clients see their connections end;
// what was committed survives (the WAL is written at commit for sessions
// with synchronous_commit on, and an immediate shutdown loses no written
// WAL: only an operating-system crash would, fsync being off). It returns
// when the server answers again. It fails for an existing server
// (PG_TEST_DSN).
func (s *Server) Restart(ctx context.Context, crash bool) error {
	return s.RestartAfter(ctx, crash, 0)
}

// waitReady pings the maintenance database until it answers.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	db, err := sql.Open("pgx", s.admin)
	if err != nil {
		return fmt.Errorf("pgtest: %s: %w", redacted(s.admin), err)
	}
	defer db.Close()
	for {
		err = db.PingContext(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-s.exit:
			return errors.New("pgtest: postgres exited during start")
		case <-ctx.Done():
			return fmt.Errorf("pgtest: %s does not answer: %w", redacted(s.admin), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close stops a started server (SIGINT, PostgreSQL's fast shutdown; SIGKILL
// after 10 s) and removes its directory. It does nothing for an existing
// server.
func (s *Server) Close() error {
	if s.cmd == nil {
		return nil
	}
	s.stop()
	serverkit.ReleasePorts(s.port)
	return os.RemoveAll(s.dir)
}

func (s *Server) stop() {
	s.Resume() // a paused server would not hear SIGINT
	s.cmd.Process.Signal(syscall.SIGINT)
	s.awaitExit()
}
