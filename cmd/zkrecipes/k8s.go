package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// k8sBackend is Kubernetes: --servers k8s:// (nothing after the scheme),
// the API server and credentials of a kubeconfig (--kubeconfig, else
// $KUBECONFIG, ~/.kube/config, else the Pod's in-cluster service account).
// The lock is a coordination.k8s.io/v1 Lease named by PATH: "namespace/name",
// or "name" in namespace "default".
const k8sBackend backend = "Kubernetes"

// k8sScheme is the whole of --servers for Kubernetes.
const k8sScheme = "k8s://"

// checkK8sServers refuses anything after the scheme: the cluster is the
// kubeconfig's, named with --kubeconfig.
func checkK8sServers(servers string) error {
	if s := strings.TrimSpace(servers); !strings.EqualFold(s, k8sScheme) {
		return fmt.Errorf("--servers %q: write k8s:// alone (the cluster is the kubeconfig's: --kubeconfig PATH, $KUBECONFIG, ~/.kube/config, or the Pod's service account)",
			redact(servers))
	}
	return nil
}

// registerKubeconfig registers --kubeconfig on lock's flags.
func (f *lockFlags) registerKubeconfig(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Kubernetes (--servers k8s://): the kubeconfig `file` whose current context names the API server and credentials (default: $KUBECONFIG, ~/.kube/config, then the Pod's service account)")
}

// checkK8sFlags refuses, as a usage error, --kubeconfig with another
// backend, and the TLS flags with Kubernetes (the kubeconfig holds the
// API server's authority and the client's certificate).
func checkK8sFlags(fs *flag.FlagSet, b backend) error {
	if b != k8sBackend {
		if flagSet(fs, "kubeconfig") {
			return fmt.Errorf("--kubeconfig means nothing for %s: it is Kubernetes' (--servers k8s://)", b)
		}
		return nil
	}
	for _, name := range []string{"tls", "tls-ca", "tls-cert", "tls-key", "tls-server-name"} {
		if flagSet(fs, name) {
			return fmt.Errorf("--%s means nothing for %s: the kubeconfig holds the API server's authority and the client's certificate", name, b)
		}
	}
	if flagSet(fs, "lock-delay") {
		return fmt.Errorf("--lock-delay is not offered on %s: backend/k8slease has no lock-delay", b)
	}
	return nil
}

// errKubeconfig marks a kubeconfig that could not be loaded (exit 64).
var errKubeconfig = errors.New("cannot load the Kubernetes client configuration")

// openK8s opens a k8slease Session on the kubeconfig's cluster with lease
// duration --ttl (a whole number of seconds). A kubeconfig that can't be
// loaded is errKubeconfig; the rest are Connect's errors. Neither the
// kubeconfig's content nor its credentials are ever part of an error or a
// log line: only the file's path.
func (f *lockFlags) openK8s(ctx context.Context, log *slog.Logger) (*lockService, error) {
	cfg, err := k8slease.ConfigFromKubeconfig(f.kubeconfig)
	if err != nil {
		where := f.kubeconfig
		if where == "" {
			where = "$KUBECONFIG, ~/.kube/config or the in-cluster service account"
		}
		return nil, fmt.Errorf("%w from %s: %w", errKubeconfig, where, err)
	}
	if f.ttl%time.Second != 0 {
		return nil, fmt.Errorf("%w: --ttl %v: Kubernetes' lease duration is a whole number of seconds", recipe.ErrBadOption, f.ttl)
	}
	s, err := k8slease.Connect(ctx, cfg, k8slease.WithLeaseDuration(f.ttl),
		k8slease.WithConnectTimeout(f.connectTimeout), k8slease.WithLogger(log))
	if err != nil {
		return nil, err
	}
	return &lockService{
		backend: k8sBackend,
		newLock: func(path string) (recipe.Lock, error) { return k8slease.New(s, path) },
		bound:   s.LeaseDuration(),
		session: func() string { return "" },
		close:   func() { _ = s.Close() },
	}, nil
}
