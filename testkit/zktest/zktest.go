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
	tls         bool // WithTLS
	fullJIT     bool // WithFullJIT
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

// WithFullJIT has the servers' JVMs compile hot code with the optimizing
// compiler as well, as a production server does: for benchmarks. By
// default they stop at the quick compiler (-XX:TieredStopAtLevel=1), which
// spends about a third less CPU starting and serving a test's light load.
func WithFullJIT() Option { return func(c *config) { c.fullJIT = true } }

// jitFlag is the JVM flag that WithFullJIT leaves out.
func (c config) jitFlag() string {
	if c.fullJIT {
		return ""
	}
	return "-XX:TieredStopAtLevel=1"
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
// provider's reason; an installed server that only failed to serve in time
// (a loaded machine) gets ErrNoServer and that reason, without the hint.
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
	if cfg.tls {
		return launchTLS(ctx, cfg)
	}
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
	if errors.Is(ctx.Err(), context.Canceled) { // interrupted: not a missing install (a deadline keeps ErrNoServer: no server in time)
		return nil, fmt.Errorf("zktest: start interrupted (%w: %v): %v", ctx.Err(), context.Cause(ctx), err)
	}
	if errors.Is(err, errExplicitInstall) {
		return nil, fmt.Errorf("%w: %s. Local install: %v", ErrNoServer, InstallHint, err)
	}
	if errors.Is(err, errSeed) {
		return nil, err
	}
	if errors.Is(err, errNotServing) { // installed, only slow: no install hint, no container
		return nil, fmt.Errorf("%w: %w", ErrNoServer, err)
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
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil, fmt.Errorf("zktest: start interrupted (%w: %v): %v", ctx.Err(), context.Cause(ctx), err)
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
