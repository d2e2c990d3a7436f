// Package k8snem puts package k8slease under the nemesis (package
// testkit/nemesis): NewTarget makes a nemesis.Target of a local
// k8stest.Cluster (one kube-apiserver over one etcd), whose clients are
// k8slease Sessions each behind the engine's FaultProxy, and whose faults
// are real process actions on the API server and on etcd, and an
// operator's writes to the Lease (faults.go). The engine brings the
// generic client faults (cut, blackhole, latency, pause of a client) and
// the checks.
//
// The Target's T (SessionTimeout) is the lease duration D: a contender
// takes an unreleased Lease over no sooner than D after it saw the
// holder's last renewal, while the holder's context ends 2D/3 after it
// sent it (docs/backends.md).
package k8snem

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// DefaultLeaseDuration is the lease duration D (T) of NewTarget's clients
// when it is given 0: a holder renews every 0.5 s and gives up 2 s after
// the send of its last acknowledged renewal; a contender takes over 3 s
// after it saw that renewal.
const DefaultLeaseDuration = 3 * time.Second

// ErrExternalCluster is matched (errors.Is) by NewTarget's error for the
// cluster of K8S_TEST_KUBECONFIG: the nemesis kills and freezes the API
// server and etcd, which must be processes k8stest started.
var ErrExternalCluster = errors.New("k8snem: the cluster is K8S_TEST_KUBECONFIG's, not one started for the nemesis (its faults would hit someone else's cluster)")

// Target is k8slease under the nemesis (a nemesis.Target and a
// nemesis.LeakFilter). It serves one run at a time.
type Target struct {
	c     *k8stest.Cluster
	d     time.Duration
	ns    string // the Target's own namespace: every lock of every run
	cs    *kubernetes.Clientset
	admin coordclient.LeaseInterface // direct, no proxy: setup, faults, checks
	conns adminConns                 // the admin's connections, closed by EndRun
	log   *slog.Logger

	mu       sync.Mutex
	base     string          // the run's base (Prepare)
	leases   map[string]bool // Lease names the run's clients asked for
	apiDown  bool            // the API server is killed (kill-apiserver's downtime, or its restart failed)
	etcdDown bool            // etcd is killed (kill-etcd's downtime, or its restart failed)
	paused   bool            // the API server is stopped (pause-apiserver, or its resume failed)
}

var (
	_ nemesis.Target     = (*Target)(nil)
	_ nemesis.LeakFilter = (*Target)(nil)
	_ nemesis.RunEnder   = (*Target)(nil)
)

// NewTarget returns the Target of c, whose clients write a lease duration
// of d (0: DefaultLeaseDuration; a whole number of seconds). It creates a
// namespace of its own ("zkr-nemesis-<random>") in which every run's
// Leases live. c must be a local cluster (k8stest.Launch or Start without
// K8S_TEST_KUBECONFIG), else the error matches ErrExternalCluster and
// nemesis.ErrBadConfig. The caller closes the Target, then c.
func NewTarget(ctx context.Context, c *k8stest.Cluster, d time.Duration) (*Target, error) {
	if c.External() {
		return nil, fmt.Errorf("%w: %w", nemesis.ErrBadConfig, ErrExternalCluster)
	}
	if d == 0 {
		d = DefaultLeaseDuration
	}
	t := &Target{c: c, d: d, log: slog.New(slog.DiscardHandler), leases: map[string]bool{}}
	cfg := t.conns.wrap(c.Config())
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("k8snem: admin client: %w", err)
	}
	t.conns.rt = hc.Transport
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("k8snem: admin client: %w", err)
	}
	t.cs, t.ns = cs, "zkr-nemesis-"+strings.ToLower(rand.Text()[:8])
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.ns}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("k8snem: creating namespace %s: %w", t.ns, err)
	}
	t.admin = cs.CoordinationV1().Leases(t.ns)
	return t, nil
}

// EndRun closes the admin client's connections (it dials again when used),
// so that one opened during the run is not counted as its leak.
func (t *Target) EndRun(context.Context) error {
	t.conns.closeAll()
	return nil
}

// Namespace is the namespace of the Target's Leases.
func (t *Target) Namespace() string { return t.ns }

// Name is "k8s".
func (t *Target) Name() string { return "k8s" }

// SessionTimeout is the lease duration D.
func (t *Target) SessionTimeout() time.Duration { return t.d }

// Registers is nil: no fenced register is kept in Kubernetes.
func (t *Target) Registers() []nemesis.Register { return nil }

// leaseName maps a lock name of the run ("/nemesis/mutex/lock") to a Lease
// name, a DNS subdomain ("nemesis.mutex.lock").
func leaseName(name string) string {
	return strings.ToLower(strings.ReplaceAll(strings.Trim(name, "/"), "/", "."))
}

// Prepare deletes every Lease of the Target's namespace (a previous run's)
// and forgets the previous run's locks.
func (t *Target) Prepare(ctx context.Context, base string) error {
	t.mu.Lock()
	t.base, t.leases = base, map[string]bool{}
	t.mu.Unlock()
	if err := t.admin.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("k8snem: clearing namespace %s: %w", t.ns, err)
	}
	return nil
}

// Connect makes client i: a k8slease Session of the admin user whose every
// connection goes through p (k8stest's ProxiedConfig), with the Target's
// lease duration and namespace.
func (t *Target) Connect(ctx context.Context, i int, p *serverkit.FaultProxy) (nemesis.Client, error) {
	cfg, err := t.c.ProxiedConfig(p, k8stest.AdminUser)
	if err != nil {
		return nil, err
	}
	s, err := k8slease.Connect(ctx, cfg, k8slease.WithLeaseDuration(t.d), k8slease.WithNamespace(t.ns),
		k8slease.WithIdentity(fmt.Sprintf("nemesis-c%d", i)),
		// the nemesis cuts and kills all the time: the history says more
		k8slease.WithLogger(t.log))
	if err != nil {
		return nil, fmt.Errorf("k8snem: client %d: %w", i, err)
	}
	return &client{t: t, s: s}, nil
}

// client is one Session of the run.
type client struct {
	t *Target
	s *k8slease.Session
}

// Lock returns k8slease's Mutex on the Lease leaseName(name) of the
// Target's namespace, and remembers it for the operator's faults.
func (c *client) Lock(name string) (recipe.Lock, error) {
	ln := leaseName(name)
	m, err := k8slease.New(c.s, c.t.ns+"/"+ln)
	if err != nil {
		return nil, err
	}
	c.t.mu.Lock()
	c.t.leases[ln] = true
	c.t.mu.Unlock()
	return m, nil
}

func (c *client) Close() error { return c.s.Close() }

// Leftovers lists the Leases of the namespace that still name a holder of
// the run's clients (every client closed, so each should have been
// released): an operator's holder (take-lease) is not one of theirs.
func (t *Target) Leftovers(ctx context.Context) ([]string, error) {
	list, err := t.admin.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range list.Items {
		h := ""
		if l.Spec.HolderIdentity != nil {
			h = *l.Spec.HolderIdentity
		}
		if h != "" && h != operator {
			out = append(out, fmt.Sprintf("Lease %s/%s held by %s (resourceVersion %s)", l.Namespace, l.Name, h, l.ResourceVersion))
		}
	}
	return out, nil
}

// Diagnose lists the run's Leases: holder, duration, transitions, version.
func (t *Target) Diagnose(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := t.admin.List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"listing the Leases: " + err.Error()}
	}
	var out []string
	for _, l := range list.Items {
		out = append(out, fmt.Sprintf("Lease %s: holder %q duration %v transitions %v resourceVersion %s renewed %v",
			l.Name, deref(l.Spec.HolderIdentity), deref(l.Spec.LeaseDurationSeconds), deref(l.Spec.LeaseTransitions),
			l.ResourceVersion, l.Spec.RenewTime))
	}
	slices.Sort(out)
	return out
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// Heal continues a paused API server, restarts a killed etcd and API
// server, and returns once the API server answers a list of the Leases
// (at most 60 s, or ctx's end).
func (t *Target) Heal(ctx context.Context) error {
	t.mu.Lock()
	apiDown, etcdDown, paused := t.apiDown, t.etcdDown, t.paused
	t.mu.Unlock()
	var errs []error
	if paused {
		if err := t.c.ResumeAPIServer(); err != nil {
			errs = append(errs, err)
		} else {
			t.set(&t.paused, false)
		}
	}
	if etcdDown {
		if err := t.c.RestartEtcd(ctx); err != nil {
			errs = append(errs, err)
		} else {
			t.set(&t.etcdDown, false)
		}
	}
	if apiDown {
		if err := t.c.RestartAPIServer(ctx); err != nil {
			errs = append(errs, err)
		} else {
			t.set(&t.apiDown, false)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := t.admin.List(lctx, metav1.ListOptions{})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("k8snem: the API server does not answer after the heal: %w", err))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Join(errs...)
}

func (t *Target) set(flag *bool, v bool) {
	t.mu.Lock()
	*flag = v
	t.mu.Unlock()
}

// IgnoreLeaks ignores the reapers k8stest and etcdtest start for a process
// a fault restarted (they live as long as the process, not the run).
func (t *Target) IgnoreLeaks() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest.(*apiServer).start.func1"),
		goleak.IgnoreAnyFunction("github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest.(*Server).start.func1"),
	}
}

// Close deletes the Target's namespace's Leases and closes the admin
// client's connections; the cluster keeps running.
func (t *Target) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer t.conns.closeAll()
	err := t.admin.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("k8snem: clearing namespace %s: %w", t.ns, err)
	}
	return nil
}

// Launch starts a local cluster of its own for the nemesis (never
// K8S_TEST_KUBECONFIG's, which the faults would hit: that variable is
// refused) and returns its Target with lease duration d (0:
// DefaultLeaseDuration), and stop, which closes the Target and the
// cluster. For programs such as cmd/nemesis. The error wraps
// k8stest.ErrNoServer, with the install hint, when no cluster can be
// started.
func Launch(ctx context.Context, d time.Duration) (t *Target, stop func() error, err error) {
	c, err := k8stest.Launch(ctx)
	if err != nil {
		return nil, nil, err
	}
	if t, err = NewTarget(ctx, c, d); err != nil {
		return nil, nil, errors.Join(err, c.Close())
	}
	return t, func() error { return errors.Join(t.Close(), c.Close()) }, nil
}
