package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// BouncerInstallHint tells a person how to make PgBouncer available. It is
// part of the error of LaunchBouncer when no pgbouncer binary is found.
//
// PgBouncer has no environment variable for an existing one, unlike the
// servers: each test configures its own (pool mode, ignored startup
// parameters), in front of whichever server it is given, PG_TEST_DSN's
// included.
const BouncerInstallHint = "install PgBouncer (apt-get install -y pgbouncer, or make setup)"

// Bouncer is a PgBouncer in front of a Server, for tests of what a pooler
// does to a client.
type Bouncer struct {
	dsn  string
	dir  string
	port int // reserved (serverkit.FreePorts) until Close
	cmd  *exec.Cmd
	exit chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// LaunchBouncer starts PgBouncer on a free loopback port in front of the
// server of dsn (a postgres:// URL), in pool mode mode ("session",
// "transaction" or "statement"), ignoring the startup parameters listed in
// ignore (PgBouncer refuses the others it does not know). It returns when
// PgBouncer answers, or ctx ends; the caller must Close it. The error wraps
// ErrNoServer and holds BouncerInstallHint when PgBouncer is missing.
func LaunchBouncer(ctx context.Context, dsn, mode string, ignore ...string) (*Bouncer, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, e := os.Stat("/usr/sbin/pgbouncer"); e != nil {
			return nil, fmt.Errorf("%w: no pgbouncer: %v; %s", ErrNoServer, err, BouncerInstallHint)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %s: %w", redacted(dsn), err)
	}
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		return nil, err
	}
	b, err := startBouncer(ctx, bin, dir, u, mode, ignore)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return b, nil
}

// StartBouncer is LaunchBouncer for a test: the Bouncer is closed at the
// test's cleanup, and the test fails at once (with BouncerInstallHint when
// PgBouncer is missing) when it cannot be started.
func StartBouncer(tb testing.TB, dsn, mode string, ignore ...string) *Bouncer {
	tb.Helper()
	b, err := LaunchBouncer(context.Background(), dsn, mode, ignore...)
	if err != nil {
		tb.Fatalf("pgtest.StartBouncer: %v", err)
	}
	tb.Cleanup(func() {
		if err := b.Close(); err != nil {
			tb.Errorf("pgtest: closing PgBouncer: %v", err)
		}
	})
	return b
}

// startBouncer writes PgBouncer's configuration in dir, runs bin and waits
// until it answers; on error it has stopped what it started.
func startBouncer(ctx context.Context, bin, dir string, u *url.URL, mode string, ignore []string) (_ *Bouncer, err error) {
	cred, err := credential(dir)
	if err != nil {
		return nil, err
	}
	ports, err := serverkit.FreePorts(1)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			serverkit.ReleasePorts(ports...)
		}
	}()
	if err := writeBouncerConfig(dir, cred, u, ports[0], mode, ignore); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := os.Create(filepath.Join(dir, "stdout.log"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := serverkit.StartChild(cmd); err != nil {
		return nil, fmt.Errorf("pgtest: starting pgbouncer: %w", err)
	}
	b := &Bouncer{dir: dir, port: ports[0], cmd: cmd, exit: make(chan struct{})}
	go func() { cmd.Wait(); close(b.exit) }()
	bu := *u
	bu.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	b.dsn = bu.String()
	if err := b.waitReady(ctx); err != nil {
		b.stop()
		logs, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
		stdout, _ := os.ReadFile(filepath.Join(dir, "stdout.log"))
		return nil, fmt.Errorf("pgtest: %v\n%s%s", err, lastLines(string(stdout), 5), lastLines(string(logs), 10))
	}
	return b, nil
}

// writeBouncerConfig writes pgbouncer.ini and its users file in dir.
func writeBouncerConfig(dir string, cred *syscall.Credential, u *url.URL, port int, mode string, ignore []string) error {
	user := u.User.Username()
	pass, _ := u.User.Password()
	target := fmt.Sprintf("host=%s port=%s user=%s", u.Hostname(), u.Port(), user)
	if pass != "" {
		target += " password=" + pass
	}
	ini := strings.Join([]string{
		"[databases]",
		"* = " + target,
		"[pgbouncer]",
		"listen_addr = 127.0.0.1",
		"listen_port = " + strconv.Itoa(port),
		"unix_socket_dir =",
		"auth_type = trust",
		"auth_file = " + filepath.Join(dir, "users.txt"),
		"pool_mode = " + mode,
		"ignore_startup_parameters = " + strings.Join(append([]string{"extra_float_digits"}, ignore...), ","),
		"logfile = " + filepath.Join(dir, "pgbouncer.log"),
		"",
	}, "\n")
	for name, text := range map[string]string{"pgbouncer.ini": ini, "users.txt": strconv.Quote(user) + ` ""` + "\n"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return err
		}
		if cred != nil {
			os.Chown(p, int(cred.Uid), int(cred.Gid))
		}
	}
	return nil
}

// DSN returns the dsn given to LaunchBouncer or StartBouncer, with
// PgBouncer's address instead of the server's.
func (b *Bouncer) DSN() string { return b.dsn }

func (b *Bouncer) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	db, err := sql.Open("pgx", b.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	for {
		err = db.PingContext(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-b.exit:
			return fmt.Errorf("pgbouncer exited during start: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("pgbouncer at %s does not answer: %w", redacted(b.dsn), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close stops PgBouncer (SIGTERM, its immediate shutdown; SIGKILL after
// 10 s) and removes its directory. It is idempotent.
func (b *Bouncer) Close() error {
	b.closeOnce.Do(func() {
		b.stop()
		serverkit.ReleasePorts(b.port)
		b.closeErr = os.RemoveAll(b.dir)
	})
	return b.closeErr
}

func (b *Bouncer) stop() {
	b.cmd.Process.Signal(syscall.SIGTERM) // immediate shutdown
	select {
	case <-b.exit:
	case <-time.After(10 * time.Second):
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.exit
	}
}
