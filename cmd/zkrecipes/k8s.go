package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

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
func (f *lockFlags) openK8s(ctx context.Context, log *slog.Logger, m recipe.Metrics) (*lockService, error) {
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
	withholdFromPlugin(cfg)
	var s *k8slease.Session
	stopPlugin := routePluginStderr(cfg, log, func() {
		s, err = k8slease.Connect(ctx, cfg, k8slease.WithLeaseDuration(f.ttl),
			k8slease.WithConnectTimeout(f.connectTimeout), k8slease.WithLogger(log), k8slease.WithMetrics(m))
	})
	if err != nil {
		stopPlugin()
		return nil, err
	}
	return &lockService{
		backend: k8sBackend,
		newLock: func(path string) (recipe.Lock, error) { return k8slease.New(s, path) },
		bound:   s.LeaseDuration(),
		session: func() string { return "" },
		close:   func() { _ = s.Close(); stopPlugin() },
	}, nil
}

// withholdFromPlugin keeps the variables of secretEnv from the kubeconfig's
// exec credential plugin, as from the command: each one set in our
// environment is given to it empty (client-go hands the plugin our whole
// environment, then the kubeconfig's env entries, which win). One the
// kubeconfig itself sets for the plugin is left as it says. --pass-env is
// for the command only.
func withholdFromPlugin(cfg *rest.Config) {
	ep := cfg.ExecProvider
	if ep == nil {
		return
	}
	for _, name := range secretEnv {
		_, set := os.LookupEnv(name)
		if set && !slices.ContainsFunc(ep.Env, func(v clientcmdapi.ExecEnvVar) bool { return v.Name == name }) {
			ep.Env = append(ep.Env, clientcmdapi.ExecEnvVar{Name: name})
		}
	}
}

// routePluginStderr runs connect with os.Stderr, which client-go gives the
// exec credential plugin of cfg as its stderr (it reads it when the client
// is made, and runs the plugin then and at each renewal of the
// credentials), turned into a pipe whose lines are logged at Warn: so
// they are scrubbed of the secrets, and JSON with --log-format json. It
// returns stop, which closes the pipe once the Session is closed. Without
// an exec plugin it just runs connect.
func routePluginStderr(cfg *rest.Config, log *slog.Logger, connect func()) (stop func()) {
	if cfg.ExecProvider == nil {
		connect()
		return func() {}
	}
	r, w, err := os.Pipe()
	if err != nil {
		connect()
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 4096), maxPluginLine)
		for sc.Scan() {
			log.Warn("kubeconfig exec plugin", "stderr", sc.Text())
		}
		_, _ = io.Copy(io.Discard, r) // past a line too long: drained unread
		_ = r.Close()
	}()
	saved := os.Stderr
	os.Stderr = w
	connect()
	os.Stderr = saved
	return sync.OnceFunc(func() {
		_ = w.Close()
		select {
		case <-done:
		case <-time.After(time.Second): // a process the plugin left behind holds the pipe
		}
	})
}

// maxPluginLine is the longest line of the exec plugin's stderr logged.
const maxPluginLine = 64 << 10
