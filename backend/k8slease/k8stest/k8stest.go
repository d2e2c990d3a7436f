// Package k8stest starts a real Kubernetes API server for tests and
// programs: package k8slease's tests, those of code built on it, the CLI's
// and the nemesis target. Tests never mock the API server and never skip
// when none can be had: they fail with InstallHint. It has the face of every
// server harness of this repository:
//
//   - Launch(ctx) for programs, which Close the cluster themselves;
//   - Start(tb) for tests: the test fails at once with InstallHint when no
//     cluster can be had, and it is closed at the test's cleanup;
//   - Shared(tb): one cluster for the whole test binary (starting one costs
//     a few seconds), stopped by Main (or StopShared); each test keeps to a
//     namespace of its own (Namespace);
//   - K8S_TEST_KUBECONFIG (EnvKubeconfig), the one environment variable
//     that names an existing cluster to use instead.
//
// A local cluster is one etcd member (backend/etcdlock/etcdtest: Debian's
// etcd-server) and one kube-apiserver (KUBE_APISERVER, else the binary
// scripts/kube-apiserver.sh builds into the cache) on free 127.0.0.1 ports,
// with its files in a temporary directory: a serving certificate of a fresh
// authority (testkit/certtest), a service-account key, and a token file
// with three users: AdminUser (group system:masters) and User and OtherUser,
// which RBAC (the only authorizer) lets do nothing until a Role says so,
// for the backend's exact Role and for hostile neighbours. The tokens are
// random and start with "s3cr3t-zkr-" (make test fails when one shows in
// any output); nothing here prints them.
//
// Faults: KillAPIServer/RestartAPIServer (SIGKILL, same port and data),
// PauseAPIServer/ResumeAPIServer (SIGSTOP/SIGCONT), KillEtcd/RestartEtcd,
// and ProxiedConfig, a client whose traffic goes through a
// serverkit.FaultProxy (cut, blackhole, latency). On a cluster of
// K8S_TEST_KUBECONFIG the process faults return ErrUnsupported; the
// non-admin users are impersonated (the kubeconfig's user needs the
// impersonate verb, as cluster-admin has).
package k8stest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/internal/conntrack"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/lazy"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// EnvKubeconfig names the kubeconfig file of a running cluster to use
// instead of starting one (its current context).
const EnvKubeconfig = "K8S_TEST_KUBECONFIG"

// EnvBinary is the path of the kube-apiserver binary to start (default: the
// one scripts/kube-apiserver.sh builds, found in its cache, CachedBinary).
const EnvBinary = "KUBE_APISERVER"

// Version is the Kubernetes release scripts/kube-apiserver.sh builds.
const Version = "v1.34.4"

// InstallHint tells a person how to make an API server available to the
// tests. It is part of every error that reports that none could be had.
const InstallHint = "run scripts/kube-apiserver.sh (builds kube-apiserver once, about 4 minutes), " +
	"or set " + EnvBinary + " to a kube-apiserver binary, or set " + EnvKubeconfig +
	" to the kubeconfig of a running cluster; etcd comes from Debian's etcd-server (scripts/setup.sh)"

// The users of a local cluster's token file (impersonated on a cluster of
// K8S_TEST_KUBECONFIG).
const (
	// AdminUser is in group system:masters: RBAC allows it everything.
	AdminUser = "zkrecipes-admin"
	// User may do nothing until a Role bound to it says so: for testing
	// the exact Role a backend documents.
	User = "zkrecipes-user"
	// OtherUser is a second such user: a hostile neighbour.
	OtherUser = "zkrecipes-other"
)

var (
	// ErrNoServer is wrapped by the error of Launch when no cluster could
	// be started or reached; the message holds InstallHint and the reason.
	ErrNoServer = errors.New("k8stest: no Kubernetes API server available")
	// ErrUnsupported is wrapped by the errors of the process faults on a
	// cluster of K8S_TEST_KUBECONFIG, which can't be controlled.
	ErrUnsupported = errors.New("k8stest: operation not supported on an external cluster")
)

const (
	// launchTimeout bounds how long Launch waits for a local cluster to be
	// ready, retries after port clashes included.
	launchTimeout = 2 * time.Minute
	// readyTimeout bounds one wait for /readyz (a start or a restart).
	readyTimeout = time.Minute
)

// Cluster is one Kubernetes API server for tests. Its methods are safe for
// concurrent use.
type Cluster struct {
	external bool
	admin    *rest.Config // template: never handed out, only copies
	tokens   map[string]string
	conns    *conntrack.Tracker

	etcd *etcdtest.Server
	api  *apiServer // nil for an external cluster

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool
}

// Option changes how Launch starts a local cluster.
type Option func(*options)

type options struct{ flags []string }

// WithFlags adds flags to the kube-apiserver command line (after the
// harness's own, so that they win), e.g. "--etcd-compaction-interval=10s"
// or "--enable-priority-and-fairness=false" for the hazards' tests. It is
// ignored on a cluster of K8S_TEST_KUBECONFIG.
func WithFlags(flags ...string) Option {
	return func(o *options) { o.flags = append(o.flags, flags...) }
}

// Launch starts a local cluster, or connects to the one of
// K8S_TEST_KUBECONFIG once it answers /readyz. The caller must Close it.
// ctx bounds the startup (at most two minutes). The error wraps ErrNoServer
// and holds InstallHint when none could be had.
func Launch(ctx context.Context, opts ...Option) (*Cluster, error) {
	if path := strings.TrimSpace(os.Getenv(EnvKubeconfig)); path != "" {
		c, err := external(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("%w: %s=%s: %v; %s", ErrNoServer, EnvKubeconfig, path, err, InstallHint)
		}
		return c, nil
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return launchLocal(ctx, o)
}

// Start launches a cluster for the test and closes it at the test's
// cleanup, failing the test (with InstallHint) when none can be had.
func Start(tb testing.TB, opts ...Option) *Cluster {
	tb.Helper()
	c, err := Launch(context.Background(), opts...)
	if err != nil {
		tb.Fatalf("k8stest.Start: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("k8stest: closing the cluster: %v", err)
		}
	})
	return c
}

var shared lazy.Shared[*Cluster]

// Shared returns the test binary's shared cluster, launching it on first
// use. Tests that share it keep to their own namespaces (Namespace) and
// must not use its process faults. Main stops it after the tests. When no
// cluster can be had the test fails at once with InstallHint, and later
// calls fail the same way without retrying.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	return shared.Get(tb, "k8stest.Shared", func() (*Cluster, error) { return Launch(context.Background()) })
}

// Main is for TestMain: func TestMain(m *testing.M) { k8stest.Main(m) }.
// It runs the tests with serverkit.MainThen (which checks with goleak that no
// goroutine is left when they passed) and stops the Shared cluster after
// them. A test binary that uses other harnesses too calls serverkit.MainThen
// itself, with StopShared in its cleanup.
func Main(m *testing.M) { serverkit.MainThen(m, StopShared) }

// StopShared stops the Shared cluster, if one was launched (a later Shared
// launches a new one), and klog's flush goroutine, which client-go's
// logging starts when the package is loaded and goleak would report.
func StopShared() {
	shared.StopOrWarn(nil, "k8stest: stopping the shared cluster")
	klog.StopFlushDaemon()
}

// Config returns a client configuration of the admin (a copy: the caller
// may change it). Its connections are closed by Close.
func (c *Cluster) Config() *rest.Config { return c.ConfigFor(AdminUser) }

// ConfigFor returns a client configuration of user (AdminUser, User or
// OtherUser; it panics on another name: a test's mistake). Its connections
// are closed by Close.
func (c *Cluster) ConfigFor(user string) *rest.Config {
	cfg := rest.CopyConfig(c.admin)
	if c.external {
		if user != AdminUser {
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		}
	} else {
		tok, ok := c.tokens[user]
		if !ok {
			panic(fmt.Sprintf("k8stest: no user %q (want AdminUser, User or OtherUser)", user))
		}
		cfg.BearerToken = tok
	}
	return cfg
}

// Client returns a clientset of the admin, for a test's own inspection and
// setup (not through any fault proxy). It fails tb if one can't be made.
func (c *Cluster) Client(tb testing.TB) kubernetes.Interface {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		tb.Fatalf("k8stest: clientset: %v", err)
	}
	return cs
}

// Host returns the API server's URL (https://127.0.0.1:port for a local
// cluster).
func (c *Cluster) Host() string { return c.admin.Host }

// External reports whether the cluster is the one of K8S_TEST_KUBECONFIG.
func (c *Cluster) External() bool { return c.external }

// Close stops the API server and etcd, removes their files and closes every
// connection of the configurations handed out. It is idempotent.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		if c.api != nil {
			c.closeErr = c.api.close()
		}
		if c.etcd != nil {
			c.closeErr = errors.Join(c.closeErr, c.etcd.Close())
		}
		c.conns.CloseAll()
	})
	return c.closeErr
}
