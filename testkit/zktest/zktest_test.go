package zktest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestMain(m *testing.M) { Main(m) }

// portReserved reports whether serverkit.FreePorts' lock file for addr's
// port is locked (by this process or another).
func portReserved(t *testing.T, addr string) bool {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	dir, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "zkrecipes", "ports", port))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil
}

// connect opens a session to servers (no chroot) and waits for it; the
// client is closed at cleanup, waiting for its goroutines.
// A non-nil dialer is passed with zk.WithDialer.
func connect(t *testing.T, servers []string, timeout time.Duration, dialer zk.Dialer) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	opts := options(zk.WithLogInfo(false), zk.WithLogger(tlog{t}))
	if dialer != nil {
		opts = append(opts, zk.WithDialer(dialer))
	}
	conn, events, err := zk.Connect(servers, timeout, opts...)
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	// Events are forwarded so that tests can wait for session states while
	// the channel is also drained at cleanup.
	out := make(chan zk.Event, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range events {
			select {
			case out <- ev:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("zk client did not shut down")
		}
	})
	waitState(t, out, zk.StateHasSession, 10*time.Second)
	return conn, out
}

// tlog sends go-zookeeper's messages to the test log (shown on failure).
type tlog struct{ t *testing.T }

func (l tlog) Printf(format string, args ...any) {
	l.t.Logf("%s zk client: %s", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// options collects go-zookeeper's options, whose type is unexported.
func options[T any](o ...T) []T { return o }

func waitState(t *testing.T, events <-chan zk.Event, want zk.State, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev := <-events:
			if ev.Type == zk.EventSession && ev.State == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %v session event within %v", want, d)
		}
	}
}

func eventually(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestStandaloneStopRestartPause(t *testing.T) {
	t.Parallel() // its own servers; after the tests that set the environment
	c := Start(t)
	if c.Chroot() != "" && c.Provider() == "local" {
		t.Fatalf("local cluster has chroot %q", c.Chroot())
	}
	if len(c.Addrs()) != 1 {
		t.Fatalf("Addrs = %v, want 1 server", c.Addrs())
	}
	addr := c.Addrs()[0]
	if out, err := FourLetter(ctxT(t), addr, "ruok"); err != nil || out != "imok" {
		t.Fatalf("ruok = %q, %v", out, err)
	}
	if i, err := c.Leader(); err != nil || i != 0 {
		t.Fatalf("Leader = %d, %v; want 0", i, err)
	}
	m, err := Mntr(ctxT(t), addr)
	if err != nil || m["zk_server_state"] != "standalone" {
		t.Fatalf("mntr zk_server_state = %q, %v", m["zk_server_state"], err)
	}

	conn, _ := connect(t, c.Addrs(), 5*time.Second, nil)
	if _, err := conn.Create("/kept", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	if err := c.Stop(0); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := FourLetter(ctxT(t), addr, "ruok"); err == nil {
		t.Fatal("ruok answered after Stop")
	}
	// The stopped server's port stays reserved, so that no other test
	// binary's harness can take it before the restart (it did, in CI).
	if !portReserved(t, addr) {
		t.Fatalf("port of %s not reserved while the server is stopped", addr)
	}
	if _, err := c.Leader(); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader after Stop: %v, want ErrNoLeader", err)
	}
	if err := c.Restart(0); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	// The data directory survived, and the old session reconnects.
	eventually(t, 10*time.Second, "read after restart", func() error {
		b, _, err := conn.Get("/kept")
		if err == nil && string(b) != "v" {
			return fmt.Errorf("got %q", b)
		}
		return err
	})

	if err := c.Pause(0); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = FourLetter(short, addr, "ruok")
	cancel()
	if err == nil {
		t.Fatal("paused server answered ruok")
	}
	if err := c.Resume(0); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if out, err := FourLetter(ctxT(t), addr, "ruok"); err != nil || out != "imok" {
		t.Fatalf("ruok after Resume = %q, %v", out, err)
	}

	// Restart of a running server stops it first; Kill then Restart works too.
	if err := c.Kill(0); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := c.Kill(0); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if err := c.Pause(0); err == nil {
		t.Fatal("Pause of a killed server succeeded")
	}
	if err := c.Restart(0); err != nil {
		t.Fatalf("Restart after Kill: %v", err)
	}
	if err := c.Stop(1); err == nil {
		t.Fatal("Stop(1) on a one-server cluster succeeded")
	}

	conn.Close()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := FourLetter(ctxT(t), addr, "ruok"); err == nil {
		t.Fatal("ruok answered after Close")
	}
	if err := c.Restart(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Restart after Close: %v, want ErrClosed", err)
	}
}

func TestEnsembleLeaderFailover(t *testing.T) {
	t.Parallel() // its own servers; after the tests that set the environment
	c := Start(t, WithEnsemble(3))
	addrs := c.Addrs()
	if len(addrs) != 3 {
		t.Fatalf("Addrs = %v, want 3", addrs)
	}
	leader, err := c.Leader()
	if err != nil {
		t.Fatal(err)
	}
	followers := 0
	for i, a := range addrs {
		m, err := Mntr(ctxT(t), a)
		if err != nil {
			t.Fatalf("mntr %d: %v", i, err)
		}
		switch st := m["zk_server_state"]; {
		case i == leader && st != "leader":
			t.Fatalf("server %d: state %q, want leader", i, st)
		case st == "follower":
			followers++
		}
	}
	if followers != 2 {
		t.Fatalf("%d followers, want 2", followers)
	}

	conn, _ := connect(t, c.Addrs(), 5*time.Second, nil)
	if _, err := conn.Create("/before", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	var next int
	eventually(t, 20*time.Second, "new leader", func() error {
		next, err = c.Leader()
		if err == nil && next == leader {
			return fmt.Errorf("old leader %d still reported", leader)
		}
		return err
	})
	t.Logf("leader %d killed, new leader %d", leader, next)

	eventually(t, 20*time.Second, "write after failover", func() error {
		_, err := conn.Create("/after", nil, 0, zk.WorldACL(zk.PermAll))
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	})

	if err := c.Restart(leader); err != nil {
		t.Fatalf("Restart old leader: %v", err)
	}
	m, err := Mntr(ctxT(t), addrs[leader])
	if err != nil || m["zk_server_state"] != "follower" {
		t.Fatalf("restarted server: state %q, %v; want follower", m["zk_server_state"], err)
	}
}

func TestSharedDistinctChroots(t *testing.T) {
	var first, second string
	var addrs []string
	t.Run("views", func(t *testing.T) {
		a, b := Shared(t), Shared(t)
		first, second = a.Chroot(), b.Chroot()
		addrs = a.Addrs()
		if first == second {
			t.Fatalf("both views have chroot %q", first)
		}
		for _, c := range []*Cluster{a, b} {
			if !strings.HasPrefix(c.Chroot(), "/zktest/TestSharedDistinctChroots_views-") {
				t.Errorf("chroot %q does not name the test", c.Chroot())
			}
			s := c.Servers()
			if last := s[len(s)-1]; !strings.HasSuffix(last, c.Chroot()) {
				t.Errorf("Servers() = %v: last element lacks the chroot", s)
			}
			if strings.Contains(c.Addrs()[0], "/") {
				t.Errorf("Addrs() = %v has a chroot", c.Addrs())
			}
			if err := c.Kill(0); !errors.Is(err, ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("Kill on a Shared view: %v, want ErrUnsupported (zktest's and errors')", err)
			}
			if i, err := c.Leader(); err != nil || i != 0 {
				t.Errorf("Leader on a Shared view = %d, %v", i, err)
			}
		}
		conn, _ := connect(t, addrs, 5*time.Second, nil)
		for _, p := range []string{first, second} {
			ok, _, err := conn.Exists(p)
			if err != nil || !ok {
				t.Fatalf("chroot %s exists = %v, %v", p, ok, err)
			}
		}
		// Something under the chroot, so that deletion must recurse.
		if _, err := conn.Create(first+"/a", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Create(first+"/a/b", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	})
	conn, _ := connect(t, addrs, 5*time.Second, nil)
	for _, p := range []string{first, second} {
		ok, _, err := conn.Exists(p)
		if err != nil || ok {
			t.Fatalf("chroot %s still exists after cleanup (%v)", p, err)
		}
	}
}

func TestWatchCount(t *testing.T) {
	c := Shared(t)
	addr := c.Addrs()[0]
	conn, _ := connect(t, c.Addrs(), 5*time.Second, nil)
	before, err := WatchCount(ctxT(t), addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := conn.ExistsW(path.Join(c.Chroot(), "watched")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "watch counted", func() error {
		n, err := WatchCount(ctxT(t), addr)
		if err == nil && n < before+1 {
			err = fmt.Errorf("WatchCount = %d, before %d", n, before)
		}
		return err
	})
}

func TestFourLetterErrors(t *testing.T) {
	if _, err := FourLetter(ctxT(t), "127.0.0.1:1", "ruok"); err == nil {
		t.Error("FourLetter to a closed port succeeded")
	}
	if _, err := FourLetter(ctxT(t), Shared(t).Addrs()[0], "toolong"); err == nil {
		t.Error("FourLetter accepted a 7-letter word")
	}
}

// TestExternalProvider points ZK_TEST_SERVERS at the shared server and checks
// that Start then gives a chroot of its own and no controls.
func TestExternalProvider(t *testing.T) {
	addr := Shared(t).Addrs()[0]
	t.Setenv(EnvServers, addr)
	var chroot string
	t.Run("start", func(t *testing.T) {
		c := Start(t)
		if c.Provider() != "env" {
			t.Fatalf("provider %q, want env", c.Provider())
		}
		chroot = c.Chroot()
		if !strings.HasPrefix(chroot, "/zktest/TestExternalProvider_start-") {
			t.Fatalf("chroot %q", chroot)
		}
		if got := c.Servers(); len(got) != 1 || got[0] != addr+chroot {
			t.Fatalf("Servers() = %v", got)
		}
		for name, f := range map[string]func(int) error{"Stop": c.Stop, "Kill": c.Kill, "Restart": c.Restart, "Pause": c.Pause, "Resume": c.Resume} {
			if err := f(0); !errors.Is(err, ErrUnsupported) {
				t.Errorf("%s: %v, want ErrUnsupported", name, err)
			}
		}
	})
	conn, _ := connect(t, []string{addr}, 5*time.Second, nil)
	if ok, _, err := conn.Exists(chroot); err != nil || ok {
		t.Fatalf("chroot %s still exists after cleanup (%v)", chroot, err)
	}
}

// fatalRecorder captures Fatalf instead of ending the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestNoProvider(t *testing.T) {
	t.Setenv(EnvServers, "")
	t.Setenv("JAVA_HOME", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	t.Setenv("ZOOKEEPER_HOME", "")

	_, err := Launch(context.Background())
	if !errors.Is(err, ErrNoServer) {
		t.Fatalf("Launch: %v, want ErrNoServer", err)
	}
	t.Logf("Launch error: %v", err)
	if !strings.Contains(err.Error(), InstallHint) || !strings.Contains(err.Error(), "java") {
		t.Fatalf("error lacks the hint or the reason: %v", err)
	}

	rec := &fatalRecorder{TB: t}
	if c := Start(rec); c != nil {
		t.Fatal("Start returned a cluster")
	}
	if !strings.Contains(rec.msg, InstallHint) {
		t.Fatalf("Start's Fatalf message lacks the hint: %q", rec.msg)
	}
}

// TestExplicitInstallIsNotReplaced: a ZOOKEEPER_HOME that is set but holds
// no jars is an error, not a silent fall-back to Debian's ZooKeeper (a run
// meant for one server version would test another).
func TestExplicitInstallIsNotReplaced(t *testing.T) {
	t.Setenv(EnvServers, "")
	missing := filepath.Join(t.TempDir(), "no-such-zookeeper")
	t.Setenv("ZOOKEEPER_HOME", missing)
	c, err := Launch(context.Background())
	if err == nil {
		c.Close()
		t.Fatal("Launch succeeded with an unusable ZOOKEEPER_HOME")
	}
	if !errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), "ZOOKEEPER_HOME="+missing) {
		t.Fatalf("Launch: %v, want ErrNoServer naming ZOOKEEPER_HOME", err)
	}
}

// TestKeepDirs: a cluster told to keep its directories leaves every
// server's log and data (transaction logs, snapshots) on disk at Close,
// and later sweeps of stale directories leave them alone; a Shared view
// has nothing to keep.
func TestKeepDirs(t *testing.T) {
	t.Parallel() // its own servers; after the tests that set the environment
	ctx, cancel := context.WithTimeout(context.Background(), launchTimeout)
	defer cancel()
	cl, err := Launch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if cl.Provider() != "local" {
		t.Fatalf("provider %s has no directories: this test needs zktest's local servers", cl.Provider())
	}
	conn, _ := connect(t, cl.Addrs(), 4*time.Second, nil)
	if _, err := conn.Create("/kept", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	dir := cl.KeepDirs()
	if dir == "" {
		t.Fatal("KeepDirs of a local cluster returned no directory")
	}
	if again := cl.KeepDirs(); again != dir {
		t.Errorf("KeepDirs again: %q, first %q", again, dir)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	sweepStale() // as the next Launch of another process would
	for _, p := range []string{"server1/server.log", "server1/zoo.cfg", "server1/data/version-2"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("kept directory: %v", err)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "server1/data/version-2/log.*"))
	if len(logs) == 0 {
		t.Errorf("no transaction log kept in %s", dir)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "server1/server.log")); err != nil || !strings.Contains(string(b), "zktest: starting server 1") {
		t.Errorf("server log: %v %q", err, b)
	}

	if d := Shared(t).KeepDirs(); d != "" {
		t.Errorf("KeepDirs of a Shared view: %q", d)
	}
}

// TestServerVersion reads the version every server reports.
func TestServerVersion(t *testing.T) {
	t.Parallel() // its own servers; after the tests that set the environment
	cl := Start(t)
	v, err := cl.ServerVersion(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if v == "" || v[0] < '3' || v[0] > '9' || !strings.Contains(v, ".") {
		t.Errorf("version %q", v)
	}
	t.Logf("ZooKeeper %s", v)
	if _, err := cl.ServerVersion(context.Background(), 1); err == nil {
		t.Error("ServerVersion(1) of a one-server cluster: no error")
	}
	if err := cl.Stop(0); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ServerVersion(context.Background(), 0); err == nil {
		t.Error("ServerVersion of a stopped server: no error")
	}
}

// TestServerPID: a local server's pid is its running JVM (QuorumPeerMain
// on its command line); a stopped server, an index out of range and a
// Shared view give errors, the view's wrapping ErrUnsupported.
func TestServerPID(t *testing.T) {
	t.Parallel() // its own servers; after the tests that set the environment
	cl := Start(t)
	pid, err := cl.ServerPID(0)
	if cl.Provider() != "local" {
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("ServerPID on a %s cluster: %d, %v; want ErrUnsupported", cl.Provider(), pid, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), mainClass) {
		t.Fatalf("pid %d: command line %q, %v; want the JVM running %s", pid, cmdline, err, mainClass)
	}
	if _, err := cl.ServerPID(1); err == nil {
		t.Error("ServerPID(1) of a one-server cluster: no error")
	}
	if _, err := Shared(t).ServerPID(0); !errors.Is(err, ErrUnsupported) {
		t.Errorf("ServerPID of a Shared view: %v, want ErrUnsupported", err)
	}
	if err := cl.Kill(0); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ServerPID(0); err == nil {
		t.Error("ServerPID of a killed server: no error")
	}
}

// TestLaunchInterrupted: a cancelled ctx is not a missing install: Launch's
// error wraps context.Canceled and its cause, not ErrNoServer with the
// install hint (Ctrl-C while cmd/nemesis started ZooKeeper said "install
// ZooKeeper and Java").
func TestLaunchInterrupted(t *testing.T) {
	t.Setenv(EnvServers, "")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupt signal received"))
	_, err := Launch(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), "interrupt signal received") {
		t.Fatalf("Launch with a cancelled ctx: %v, want context.Canceled with its cause, not ErrNoServer", err)
	}
}
