package zktest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// InstallHint tells a person how to make a ZooKeeper server available to the
// tests. It is part of every error that reports that no provider worked.
const InstallHint = "install ZooKeeper and Java: sudo apt-get install -y zookeeper default-jre-headless " +
	"(or set ZOOKEEPER_HOME to an unpacked ZooKeeper release and JAVA_HOME to a JRE, " +
	"or set ZK_TEST_SERVERS=host:port,... to use an existing ensemble)"

// EnvServers is the environment variable that names an existing ensemble as a
// comma-separated list of host:port. When it is set, that ensemble is tried
// first and every cluster gets its own chroot on it.
const EnvServers = "ZK_TEST_SERVERS"

var (
	// ErrNoServer is wrapped by the error Launch returns when no provider could
	// give a ZooKeeper server. The error text also holds InstallHint and the
	// reason each provider failed.
	ErrNoServer = errors.New("zktest: no ZooKeeper server available")

	// ErrUnsupported is wrapped by the errors of the server controls (Stop,
	// Kill, Restart, Pause, Resume) and of ServerPID on clusters that cannot
	// be controlled: an external ensemble from ZK_TEST_SERVERS, a container,
	// or a Shared view. It matches errors.ErrUnsupported too.
	ErrUnsupported = fmt.Errorf("zktest: operation not supported by this cluster (%w)", errors.ErrUnsupported)

	// ErrNoLeader is wrapped by the error of Cluster.Leader when no reachable
	// server reports itself as leader (or standalone), for example during an
	// election.
	ErrNoLeader = errors.New("zktest: no leader")

	// ErrClosed is wrapped by the errors of the controls of a closed Cluster.
	ErrClosed = errors.New("zktest: cluster is closed")
)

const (
	defaultTick = 100 * time.Millisecond
	// launchTimeout bounds how long Start and Shared wait for a provider,
	// including retries after port clashes.
	launchTimeout = 90 * time.Second
)

// config holds the settings chosen with Options.
type config struct {
	ensemble int
	tick     time.Duration
	logger   *slog.Logger
	// seqCounters are the directories and counters to seed (WithSeqCounters).
	seqCounters map[string]int32
}

func newConfig(opts []Option) config {
	c := config{ensemble: 1, tick: defaultTick, logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// Option changes how a cluster is started by Start or Launch.
type Option func(*config)

// WithEnsemble asks for an ensemble of n servers on 127.0.0.1. The default,
// n = 1, is a standalone server; values below 1 are treated as 1. The local
// provider starts n JVMs; an external ensemble (ZK_TEST_SERVERS) is used as it
// is whatever n says, and the container provider supports only n = 1.
func WithEnsemble(n int) Option {
	return func(c *config) {
		if n < 1 {
			n = 1
		}
		c.ensemble = n
	}
}

// WithTickTime sets the servers' tickTime (default 100 ms). Session timeouts
// are bounded below by 2 ticks, and the servers check expiry once a tick, so
// a short tick makes session-expiry tests fast. Values are rounded down to
// whole milliseconds; values under 1 ms are treated as the default.
func WithTickTime(d time.Duration) Option {
	return func(c *config) {
		if d < time.Millisecond {
			d = defaultTick
		}
		c.tick = d.Truncate(time.Millisecond)
	}
}

// WithLogger sends zktest's own progress messages (servers started, provider
// fallbacks, client messages of the helper connections) to l at debug and
// info level. The default discards them.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// controller is implemented by providers whose servers can be controlled.
// Indexes are already checked by Cluster.
type controller interface {
	stop(i int) error
	kill(i int) error
	restart(ctx context.Context, i int) error
	pause(i int) error
	resume(i int) error
	// running reports whether server i's process is up (for Leader).
	running(i int) bool
	// pid returns server i's process id while it runs.
	pid(i int) (int, error)
}

// Cluster is a set of real ZooKeeper servers, optionally seen through a
// chroot. Its methods are safe for concurrent use.
type Cluster struct {
	provider string
	addrs    []string
	chroot   string
	ctrl     controller // nil when the cluster cannot be controlled
	noCtrl   string     // why ctrl is nil

	closeOnce sync.Once
	closeErr  error
	closeFn   func() error
	// logTails returns the last n lines of each server's log, when known.
	logTails func(n int) string
	// keep makes Close leave the servers' directories and returns where
	// they are; nil when the cluster has none of its own.
	keep     func() string
	closedMu sync.Mutex
	closed   bool
}

// Servers returns the client connect list: one "127.0.0.1:port" (or the
// external ensemble's host:port) per server. When the cluster has a chroot it
// is appended to the last element, as in "127.0.0.1:2181,127.0.0.1:2182/zktest/x",
// following ZooKeeper's connect-string convention. go-zookeeper v1.0.4 does
// not understand that suffix: give it Addrs and prefix paths with Chroot
// instead. The slice is a copy.
func (c *Cluster) Servers() []string {
	s := c.Addrs()
	if c.chroot != "" && len(s) > 0 {
		s[len(s)-1] += c.chroot
	}
	return s
}

// Addrs returns the plain host:port of each server, without chroot, in server
// order (index i of the controls is Addrs()[i]). Use it for four-letter words
// and for proxies. The slice is a copy.
func (c *Cluster) Addrs() []string {
	return append([]string(nil), c.addrs...)
}

// Chroot returns the cluster's chroot path, such as "/zktest/TestX-1a2b3c4d",
// or "" when clients see the whole tree.
func (c *Cluster) Chroot() string { return c.chroot }

// Provider names where the servers come from: "local" (JVMs started by
// zktest), "env" (ZK_TEST_SERVERS) or "docker" (testcontainers).
func (c *Cluster) Provider() string { return c.provider }

// Close stops the servers the cluster owns (SIGKILL to their process groups,
// waiting for exit), removes their temporary directories, and deletes the
// cluster's chroot with everything under it. It is idempotent; later calls
// return the first call's error.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.closedMu.Lock()
		c.closed = true
		c.closedMu.Unlock()
		if c.closeFn != nil {
			c.closeErr = c.closeFn()
		}
	})
	return c.closeErr
}

// KeepDirs makes Close leave the servers' directories on disk, for a
// post-mortem of a failed run: one serverN folder per server (numbered
// from 1, as its myid) with its zoo.cfg, its server.log and its data
// directory (transaction logs and snapshots). It returns their parent
// directory, or "" when the cluster has no directories of its own (an
// external ensemble, a container, a Shared view). Kept directories are no
// longer removed by the sweep of stale directories that Start and Launch
// do: delete them by hand. Call it before Close; calling it again returns
// the same directory.
func (c *Cluster) KeepDirs() string {
	if c.keep == nil {
		return ""
	}
	return c.keep()
}

// ServerVersion returns the version line that server i (as in Addrs)
// reports to the srvr four-letter word, such as
// "3.8.0-${mvngit.commit.id}, built on ..." for Debian's 3.8.0 package.
// The server must be up; ctx bounds the exchange.
func (c *Cluster) ServerVersion(ctx context.Context, i int) (string, error) {
	if i < 0 || i >= len(c.addrs) {
		return "", fmt.Errorf("zktest: ServerVersion(%d): server index out of range [0,%d)", i, len(c.addrs))
	}
	return serverVersion(ctx, c.addrs[i])
}

// ServerPID returns the operating-system process id of server i (as in
// Addrs): the JVM zktest started, for reading its resource use (CPU time
// in /proc/<pid>/stat, say). It changes when Restart starts a new process.
// The error wraps ErrUnsupported when the server is not a local process of
// this cluster (an external ensemble from ZK_TEST_SERVERS, a container, a
// Shared view), ErrClosed after Close, and says so when the index is out
// of range or the server is not running (stopped or killed).
func (c *Cluster) ServerPID(i int) (int, error) {
	ctrl, err := c.control("ServerPID", i)
	if err != nil {
		return 0, err
	}
	return ctrl.pid(i)
}

func (c *Cluster) control(op string, i int) (controller, error) {
	c.closedMu.Lock()
	closed := c.closed
	c.closedMu.Unlock()
	if closed {
		return nil, fmt.Errorf("zktest: %s(%d): %w", op, i, ErrClosed)
	}
	if c.ctrl == nil {
		return nil, fmt.Errorf("zktest: %s(%d) on %s: %w", op, i, c.noCtrl, ErrUnsupported)
	}
	if i < 0 || i >= len(c.addrs) {
		return nil, fmt.Errorf("zktest: %s(%d): server index out of range [0,%d)", op, i, len(c.addrs))
	}
	return c.ctrl, nil
}

// Stop stops server i (0-based, as in Addrs) gracefully with SIGTERM and
// waits until its process has exited (up to 10 s, then it is killed). A
// paused server is resumed so that it can handle the signal. Stopping a
// server that is not running is a no-op. The error wraps ErrUnsupported for
// clusters that cannot be controlled and ErrClosed after Close.
func (c *Cluster) Stop(i int) error {
	ctrl, err := c.control("Stop", i)
	if err != nil {
		return err
	}
	return ctrl.stop(i)
}

// Kill kills server i with SIGKILL (the whole process group) and waits until
// its process has exited. Killing a server that is not running is a no-op.
// The error wraps ErrUnsupported for clusters that cannot be controlled and
// ErrClosed after Close.
func (c *Cluster) Kill(i int) error {
	ctrl, err := c.control("Kill", i)
	if err != nil {
		return err
	}
	return ctrl.kill(i)
}

// Restart starts server i again with the same configuration, ports and data
// directory, stopping it gracefully first if it is still running, and waits
// up to 30 s until it serves clients (standalone, or following/leading in an
// ensemble). A member of an ensemble serves only once a quorum is up, so
// after stopping a majority, restart the others concurrently. The error holds
// the tail of the server's log when it does not come up; it wraps
// ErrUnsupported for clusters that cannot be controlled and ErrClosed after
// Close.
func (c *Cluster) Restart(i int) error {
	ctrl, err := c.control("Restart", i)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	return ctrl.restart(ctx, i)
}

// Pause freezes server i with SIGSTOP to its process group: its sockets stay
// open but it answers nothing, so clients and peers only notice through their
// timeouts. On Linux it returns once every thread of the JVM is stopped (the
// signal is delivered asynchronously; up to 5 s). Undo it with Resume. The
// error wraps ErrUnsupported for clusters that cannot be controlled and
// ErrClosed after Close; pausing a server that is not running is an error.
func (c *Cluster) Pause(i int) error {
	ctrl, err := c.control("Pause", i)
	if err != nil {
		return err
	}
	return ctrl.pause(i)
}

// Resume continues server i after Pause with SIGCONT. The error wraps
// ErrUnsupported for clusters that cannot be controlled and ErrClosed after
// Close.
func (c *Cluster) Resume(i int) error {
	ctrl, err := c.control("Resume", i)
	if err != nil {
		return err
	}
	return ctrl.resume(i)
}

// Leader returns the index (as in Addrs) of the server that reports "Mode:
// leader" to the srvr four-letter word; a standalone server is its own leader,
// so a one-server cluster answers 0. Servers that are stopped or do not answer
// within 2 s are skipped. It only reads, so it also works on external
// ensembles and Shared views (which have a single entry when standalone). The
// error wraps ErrNoLeader when no server claims leadership (for example during
// an election: poll), and ErrClosed after Close.
func (c *Cluster) Leader() (int, error) {
	c.closedMu.Lock()
	closed := c.closed
	c.closedMu.Unlock()
	if closed {
		return -1, fmt.Errorf("zktest: Leader: %w", ErrClosed)
	}
	var modes []string
	for i, a := range c.addrs {
		if c.ctrl != nil && !c.ctrl.running(i) {
			modes = append(modes, fmt.Sprintf("%d: not running", i))
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		mode, err := serverMode(ctx, a)
		cancel()
		if err != nil {
			modes = append(modes, fmt.Sprintf("%d: %v", i, err))
			continue
		}
		if mode == "leader" || mode == "standalone" {
			return i, nil
		}
		modes = append(modes, fmt.Sprintf("%d: %s", i, mode))
	}
	return -1, fmt.Errorf("%w (%s)", ErrNoLeader, strings.Join(modes, "; "))
}

// Start gives the test its own cluster and registers its Close with
// t.Cleanup (processes killed, temporary directories removed, chroot
// deleted). Providers are tried in order: ZK_TEST_SERVERS, a local
// ZooKeeper/Java install, then a testcontainers container when Docker answers.
// When none works the test fails at once through t.Fatalf with InstallHint
// and each provider's reason; Start never skips. Startup waits up to 30 s per
// attempt for the servers to serve.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	cfg := newConfig(opts)
	ctx, cancel := context.WithTimeout(context.Background(), launchTimeout)
	defer cancel()
	c, err := launch(ctx, cfg, sanitize(t.Name()), true)
	if err != nil {
		t.Fatalf("zktest.Start: %v", err)
		return nil
	}
	t.Cleanup(func() {
		if t.Failed() && c.logTails != nil {
			t.Logf("zktest: the test failed; server logs end with:\n%s", c.logTails(30))
		}
		if err := c.Close(); err != nil {
			t.Errorf("zktest: closing cluster: %v", err)
		}
	})
	t.Logf("zktest: %s ZooKeeper, %d server(s): %s", c.provider, len(c.addrs), strings.Join(c.Servers(), ","))
	return c
}

// Launch is Start for programs such as demos and benchmarks: it returns a
// cluster the caller must Close. ctx bounds the whole startup. When no
// provider works the error wraps ErrNoServer and holds InstallHint and each
// provider's reason.
func Launch(ctx context.Context, opts ...Option) (*Cluster, error) {
	cfg := newConfig(opts)
	return launch(ctx, cfg, "launch", true)
}

var (
	sharedMu      sync.Mutex
	sharedCluster *Cluster
	sharedErr     error
)

// Shared returns a view of one package-wide standalone server, started
// lazily by the first call in the test binary and stopped by Main. Each call
// creates a fresh chroot "/zktest/<test-name>-<random>" and registers its
// recursive deletion with t.Cleanup, so tests sharing the server cannot see
// each other's znodes. It is cheap: use it for tests that need no control over
// the server. The view's Stop, Kill, Restart, Pause and Resume return
// ErrUnsupported and its Close only deletes the chroot. When no provider works
// the test fails through t.Fatalf with InstallHint, and later calls fail the
// same way without retrying.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	base, err := sharedBase()
	if err != nil {
		t.Fatalf("zktest.Shared: %v", err)
		return nil
	}
	c, err := base.chrootView(sanitize(t.Name()))
	if err != nil {
		t.Fatalf("zktest.Shared: %v", err)
		return nil
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("zktest: deleting chroot %s: %v", c.chroot, err)
		}
	})
	return c
}

func sharedBase() (*Cluster, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedCluster == nil && sharedErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), launchTimeout)
		defer cancel()
		sharedCluster, sharedErr = launch(ctx, newConfig(nil), "shared", false)
	}
	return sharedCluster, sharedErr
}

// stopShared closes the shared server, if one was started.
func stopShared() error {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	c := sharedCluster
	sharedCluster, sharedErr = nil, nil
	if c == nil {
		return nil
	}
	return c.Close()
}

// chrootView returns a cluster on the same servers seen through a new chroot
// named after name; its Close deletes the chroot only.
func (c *Cluster) chrootView(name string) (*Cluster, error) {
	path := newChrootPath(name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := createChroot(ctx, c.addrs, path, discardLogger()); err != nil {
		return nil, err
	}
	addrs := c.Addrs()
	return &Cluster{
		provider: c.provider,
		addrs:    addrs,
		chroot:   path,
		noCtrl:   "a Shared view (use Start for a server of your own)",
		closeFn: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return deleteChroot(ctx, addrs, path, discardLogger())
		},
	}, nil
}

// launch tries the providers in order. name is used for chroots; withChroot
// says whether an external ensemble gets a chroot of its own.
func launch(ctx context.Context, cfg config, name string, withChroot bool) (*Cluster, error) {
	var reasons []string
	seeded := len(cfg.seqCounters) > 0
	if seeded {
		if err := checkSeqCounters(cfg.seqCounters); err != nil {
			return nil, err
		}
	}

	if env := strings.TrimSpace(os.Getenv(EnvServers)); env != "" {
		if seeded {
			return nil, errSeedUnsupported("the external ensemble " + EnvServers + "=" + env)
		}
		c, err := startExternal(ctx, cfg, env, name, withChroot)
		if err == nil {
			return c, nil
		}
		cfg.logger.Warn("zktest: external ensemble unusable, trying the next provider", "var", EnvServers, "err", err)
		reasons = append(reasons, fmt.Sprintf("%s=%q: %v", EnvServers, env, err))
	} else {
		reasons = append(reasons, EnvServers+" is not set")
	}

	c, err := startLocal(ctx, cfg)
	if err == nil {
		return c, nil
	}
	if errors.Is(err, errExplicitInstall) {
		return nil, fmt.Errorf("%w: %s. Local install: %v", ErrNoServer, InstallHint, err)
	}
	if errors.Is(err, errSeed) {
		return nil, err
	}
	if seeded {
		reasons = append(reasons, "local install: "+err.Error(), "docker: not tried: "+errSeedUnsupported("a container").Error())
		return nil, fmt.Errorf("%w: %s. Providers tried: %s", ErrNoServer, InstallHint, strings.Join(reasons, "; "))
	}
	cfg.logger.Warn("zktest: local ZooKeeper unusable, trying the next provider", "err", err)
	reasons = append(reasons, "local install: "+err.Error())

	c, err = dockerProvider(ctx, cfg)
	if err == nil {
		return c, nil
	}
	reasons = append(reasons, "docker: "+err.Error())
	return nil, fmt.Errorf("%w: %s. Providers tried: %s", ErrNoServer, InstallHint, strings.Join(reasons, "; "))
}

// nettyFactory replaces ZooKeeper's default NIO connection factory: in
// ZooKeeper 3.8.0's standalone server, a client that connects while the
// server is still loading its data (as every client does when a test
// restarts the server) hits a NullPointerException in NIOServerCnxn.close
// that leaves its socket open and unanswered, so the client hangs until its
// own connect timeout (20 session timeouts in go-zookeeper). The Netty
// factory closes such connections properly.
const nettyFactory = "org.apache.zookeeper.server.NettyServerCnxnFactory"

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// sanitize turns a test name into one znode path element.
func sanitize(name string) string {
	s := unsafeChars.ReplaceAllString(name, "_")
	s = strings.Trim(s, "._")
	if len(s) > 64 {
		s = s[:64]
	}
	if s == "" {
		s = "test"
	}
	return s
}

func newChrootPath(name string) string {
	return fmt.Sprintf("%s/%s-%08x", chrootRoot, name, rand.Uint32())
}

// chrootRoot is the parent of every chroot zktest creates.
const chrootRoot = "/zktest"
