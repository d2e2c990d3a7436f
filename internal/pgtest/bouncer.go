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
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// BouncerInstallHint is what a test that cannot start PgBouncer tells its
// reader.
const BouncerInstallHint = "install PgBouncer (apt-get install -y pgbouncer, or make setup)"

// Bouncer is a PgBouncer in front of a Server, for tests of what a pooler
// does to a client.
type Bouncer struct {
	dsn  string
	dir  string
	cmd  *exec.Cmd
	exit chan struct{}
}

// StartBouncer starts PgBouncer on a free loopback port in front of the
// server of dsn (a postgres:// URL), in pool mode mode ("session",
// "transaction" or "statement"), ignoring the startup parameters listed in
// ignore (PgBouncer refuses the others it does not know). It returns when
// PgBouncer answers; a cleanup stops it. It fails tb with the install hint
// when PgBouncer is missing.
func StartBouncer(tb testing.TB, dsn, mode string, ignore ...string) *Bouncer {
	tb.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, e := os.Stat("/usr/sbin/pgbouncer"); e != nil {
			tb.Fatalf("pgtest: no pgbouncer: %v (%s)", err, BouncerInstallHint)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	cred, err := credential(dir)
	if err != nil {
		tb.Fatal(err)
	}
	ports, err := zktest.FreePorts(1)
	if err != nil {
		tb.Fatal(err)
	}
	port := ports[0]
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
			tb.Fatal(err)
		}
		if cred != nil {
			os.Chown(p, int(cred.Uid), int(cred.Gid))
		}
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := os.Create(filepath.Join(dir, "stdout.log"))
	if err != nil {
		tb.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := zktest.StartChild(cmd); err != nil {
		tb.Fatalf("pgtest: starting pgbouncer: %v", err)
	}
	b := &Bouncer{dir: dir, cmd: cmd, exit: make(chan struct{})}
	go func() { cmd.Wait(); close(b.exit) }()
	tb.Cleanup(b.stop)
	bu := *u
	bu.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	b.dsn = bu.String()
	if err := b.waitReady(); err != nil {
		logs, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
		stdout, _ := os.ReadFile(filepath.Join(dir, "stdout.log"))
		tb.Fatalf("pgtest: %v\n%s%s", err, lastLines(string(stdout), 5), lastLines(string(logs), 10))
	}
	return b
}

// DSN returns dsn (StartBouncer's) with PgBouncer's address instead of the
// server's.
func (b *Bouncer) DSN() string { return b.dsn }

func (b *Bouncer) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
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
			return fmt.Errorf("pgbouncer at %s does not answer: %w", b.dsn, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
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
