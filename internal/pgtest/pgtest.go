// Package pgtest starts throwaway PostgreSQL servers for tests, as zktest
// does for ZooKeeper: a fresh cluster made with initdb in a temporary
// directory, served by a postgres child process on a free loopback port, and
// removed on Close. Set PG_TEST_DSN to use an existing server instead (its
// role needs CREATEDB: every test gets a database of its own).
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
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/zkrecipes/zkrecipes/zktest"
)

// EnvDSN names the environment variable that points the tests at an existing
// server, e.g. postgres://me@127.0.0.1:5432/postgres?sslmode=disable.
const EnvDSN = "PG_TEST_DSN"

// InstallHint is what a test that cannot start PostgreSQL tells its reader.
const InstallHint = "install PostgreSQL (apt-get install -y postgresql, or make setup) or set " + EnvDSN + " to an existing server"

// readyTimeout bounds initdb plus the first successful connection.
const readyTimeout = 60 * time.Second

// Server is one PostgreSQL server: started by Start, or the existing one
// named by PG_TEST_DSN.
type Server struct {
	admin string // DSN of the maintenance database, as a superuser or a CREATEDB role
	dir   string // data and socket directory; "" for an existing server
	bin   string // directory of the server binaries
	cred  *syscall.Credential
	cmd   *exec.Cmd
	exit  chan struct{} // closed when cmd has been waited for
	port  int
}

// DSN returns the address of the server's maintenance database
// (postgres://…/postgres?sslmode=disable for a started server).
func (s *Server) DSN() string { return s.admin }

// Port returns the server's TCP port on 127.0.0.1 (0 for an existing server
// named by PG_TEST_DSN).
func (s *Server) Port() int { return s.port }

// Start starts a new server, or returns the one named by PG_TEST_DSN. The
// error names the install hint when no server binaries are found.
func Start(ctx context.Context) (*Server, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		s := &Server{admin: dsn}
		return s, s.waitReady(ctx)
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
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--no-sync", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %v: %s", err, lastLines(string(out), 5))
	}
	for attempt := 0; ; attempt++ {
		s, err := startOnce(ctx, bin, dir, cred)
		if err == nil || attempt == 3 || ctx.Err() != nil {
			if err != nil {
				os.RemoveAll(dir)
			}
			return s, err
		}
	}
}

// startOnce runs postgres on a free port and waits until it answers.
func startOnce(ctx context.Context, bin, dir string, cred *syscall.Credential) (*Server, error) {
	ports, err := zktest.FreePorts(1)
	if err != nil {
		return nil, err
	}
	port := ports[0]
	s := &Server{
		admin: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		dir:   dir, bin: bin, cred: cred, port: port,
	}
	if err := s.run(ctx); err != nil {
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
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if err := zktest.StartChild(cmd); err != nil {
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
	if s.cmd == nil {
		return errors.New("pgtest: Restart needs a server started by pgtest, not " + EnvDSN)
	}
	sig := syscall.SIGINT
	if crash {
		sig = syscall.SIGQUIT
	}
	s.cmd.Process.Signal(sig)
	select {
	case <-s.exit:
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exit
	}
	return s.run(ctx)
}

// waitReady pings the maintenance database until it answers.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	db, err := sql.Open("pgx", s.admin)
	if err != nil {
		return fmt.Errorf("pgtest: %s: %w", s.admin, err)
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
			return fmt.Errorf("pgtest: %s does not answer: %w", s.admin, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var dbSeq atomic.Int64

// NewDatabase creates an empty database with a fresh name that starts with
// prefix and returns its DSN. Names are lowercased and reduced to letters,
// digits and underscores.
func (s *Server) NewDatabase(ctx context.Context, prefix string) (string, error) {
	name := fmt.Sprintf("%s_%d_%d", sanitize(prefix), os.Getpid(), dbSeq.Add(1))
	db, err := sql.Open("pgx", s.admin)
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return withDatabase(s.admin, name)
}

// DropDatabase drops the database of dsn (one NewDatabase returned),
// ending its remaining connections first.
func (s *Server) DropDatabase(ctx context.Context, dsn string) error {
	name, err := databaseOf(dsn)
	if err != nil {
		return err
	}
	db, err := sql.Open("pgx", s.admin)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	return err
}

// Close stops a started server (SIGINT, PostgreSQL's fast shutdown; SIGKILL
// after 10 s) and removes its directory. It does nothing for an existing
// server.
func (s *Server) Close() error {
	if s.cmd == nil {
		return nil
	}
	s.stop()
	return os.RemoveAll(s.dir)
}

func (s *Server) stop() {
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exit:
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exit
	}
}

var shared struct {
	mu       sync.Mutex
	srv      *Server
	err      error
	examples []string // DSNs handed out by ExampleDSN
}

// Shared returns the DSN of a new database on a server shared by the whole
// test binary (started on first use), dropped when tb ends. It fails tb
// with the install hint if no server can be started. Call StopShared from
// TestMain after m.Run.
func Shared(tb testing.TB) string {
	tb.Helper()
	srv := SharedServer(tb)
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	dsn, err := srv.NewDatabase(ctx, tb.Name())
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		defer cancel()
		if err := srv.DropDatabase(ctx, dsn); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return dsn
}

// SharedServer returns the server behind Shared, starting it on first use.
func SharedServer(tb testing.TB) *Server {
	tb.Helper()
	srv, err := sharedServer()
	if err != nil {
		tb.Fatalf("pgtest: no PostgreSQL server: %v (%s)", err, InstallHint)
	}
	return srv
}

func sharedServer() (*Server, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = Start(context.Background())
	}
	return shared.srv, shared.err
}

// ExampleDSN is for runnable Example functions, which have no testing.TB:
// it returns the DSN of a new database on the shared server, dropped by
// StopShared. It panics with the install hint when no server can be started
// (an example must not pass without a server).
func ExampleDSN() string {
	srv, err := sharedServer()
	if err != nil {
		panic(fmt.Sprintf("pgtest.ExampleDSN: no PostgreSQL server: %v (%s)", err, InstallHint))
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	dsn, err := srv.NewDatabase(ctx, "example")
	if err != nil {
		panic(fmt.Sprintf("pgtest.ExampleDSN: %v", err))
	}
	shared.mu.Lock()
	shared.examples = append(shared.examples, dsn)
	shared.mu.Unlock()
	return dsn
}

// StopShared drops the databases of ExampleDSN and stops the shared server,
// if one was started.
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		for _, dsn := range shared.examples {
			shared.srv.DropDatabase(ctx, dsn)
		}
		cancel()
		shared.srv.Close()
	}
	shared.srv, shared.err, shared.examples = nil, nil, nil
}

// findBinDir returns the directory of initdb and postgres.
func findBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("pgtest: no initdb and postgres found in /usr/lib/postgresql/*/bin or PATH: %s", InstallHint)
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// credential returns the user to run the server as (postgres when running as
// root, nil otherwise) and gives it dir.
func credential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root needs a postgres user to run the server as: %w (%s)", err, InstallHint)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 30 {
			break
		}
	}
	if b.Len() == 0 || (b.String()[0] >= '0' && b.String()[0] <= '9') {
		return "t" + b.String()
	}
	return b.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// withDatabase returns dsn (a postgres:// URL) with its database replaced.
func withDatabase(dsn, name string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("pgtest: %s must be a postgres:// URL", EnvDSN)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// databaseOf returns the database named by dsn (a postgres:// URL).
func databaseOf(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || len(u.Path) < 2 {
		return "", fmt.Errorf("pgtest: no database in %q", dsn)
	}
	return sanitize(u.Path[1:]), nil
}
