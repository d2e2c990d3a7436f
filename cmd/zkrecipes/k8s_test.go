package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// k8sTestSecret starts every token of k8stest's users: no output of the
// command may hold it.
const k8sTestSecret = "s3cr3t-zkr-"

// kubeconfig writes cfg to a kubeconfig file of the test's (it holds the
// user's token) and returns its path.
func kubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := k8stest.WriteKubeconfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

// noSecret fails t if a process's output holds a token.
func noSecret(t *testing.T, ps ...*proc) {
	t.Helper()
	for _, p := range ps {
		if out := p.stderr.String() + p.stdout.String(); strings.Contains(out, k8sTestSecret) {
			t.Errorf("zkrecipes %q printed a token:\n%s", p.cmd.Args, out)
		}
	}
}

// TestLockK8s: with --servers k8s:// and --kubeconfig, a holder runs its
// command with a token while --wait 0 exits 75 without running its own; a
// waiter runs after the holder's command is done, with a larger token.
// Then the leader-gated case: an operator deletes the Lease under a
// holder whose command runs until stopped; the holder stops it (SIGTERM)
// and exits 79, and a waiter is granted with a larger token still. No
// output holds the kubeconfig's token.
func TestLockK8s(t *testing.T) {
	t.Parallel()
	c := k8stest.Shared(t)
	ns := k8stest.Namespace(t, c)
	kc := kubeconfig(t, c.Config())
	path, dir := ns+"/cli-lock", t.TempDir()
	gate, ran, log, pid := filepath.Join(dir, "gate"), filepath.Join(dir, "ran"), filepath.Join(dir, "log"), filepath.Join(dir, "pid")
	g1, g2, g3 := filepath.Join(dir, "g1"), filepath.Join(dir, "g2"), filepath.Join(dir, "g3")
	lock := func(args ...string) *proc {
		return startOn(t, "k8s://", dir, append([]string{"lock", "--kubeconfig", kc, "--ttl", "3s"}, args...)...)
	}

	holder := lock(path, "--", "sh", "-c", grantScript(g1, gate))
	if r := holder.awaitLog("lock acquired"); r["backend"] != string(k8sBackend) {
		t.Errorf("the grant's log names backend %v, want %s", r["backend"], k8sBackend)
	}
	first := readGrant(t, g1)
	if first.token == 0 || first.path != path {
		t.Errorf("the command's environment: %+v; want a token and ZKRECIPES_PATH %s", first, path)
	}
	refused := lock("--wait", "0", path, "--", "touch", ran)
	refused.expect(exitHeld, 30*time.Second)
	waiter := lock(path, "--", "sh", "-c", fmt.Sprintf(`trap 'echo terminated >> %[1]s; exit 0' TERM; echo $$ > %[2]s; %[3]s; while :; do sleep 0.1; done`,
		log, pid, grantScript(g2, "")))
	waiter.awaitLog("acquiring the lock")
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("a command ran while the lock was held elsewhere")
	}
	touch(t, gate)
	holder.expect(0, 30*time.Second)
	waiter.awaitLog("lock acquired")
	second := readGrant(t, g2)
	child := readPid(t, pid)

	// The operator deletes the Lease: the holder stops its command.
	next := lock(path, "--", "sh", "-c", grantScript(g3, ""))
	next.awaitLog("acquiring the lock")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := strings.TrimPrefix(path, ns+"/")
	if err := c.Client(t).CoordinationV1().Leases(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waiter.expect(exitLost, 30*time.Second)
	if lines := readLines(t, log); len(lines) != 1 || lines[0] != "terminated" {
		t.Errorf("the command was not stopped with SIGTERM: %q", lines)
	}
	serverkit.Eventually(t, 10*time.Second, "the command gone", func() bool { return !running(child) })
	next.expect(0, 30*time.Second)
	third := readGrant(t, g3)
	if !(first.token < second.token && second.token < third.token) {
		t.Errorf("tokens %d, %d, %d: not growing", first.token, second.token, third.token)
	}
	noSecret(t, holder, refused, waiter, next)
}

// TestLockK8sBadInput: what the Kubernetes backend refuses before any
// request is a usage error (64): something after k8s://, --kubeconfig with
// another backend, a TLS flag with Kubernetes, a kubeconfig that can't be
// loaded, a lock name that is no "namespace/name", a --ttl of a fraction of
// a second. An API server that can't be reached is 69, and a user RBAC
// allows nothing fails (70) without holding anything. No message holds
// the kubeconfig's token.
func TestLockK8sBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dead := &rest.Config{Host: "https://127.0.0.1:1", BearerToken: k8sTestSecret + "dead"}
	dead.Insecure = true
	deadKC := kubeconfig(t, dead)
	c := k8stest.Shared(t)
	ns := k8stest.Namespace(t, c)
	for _, tc := range []struct {
		name    string
		servers string
		args    []string
		want    int
	}{
		{"scheme with a host", "k8s://api:6443", []string{"ns/x"}, exitUsage},
		{"kubeconfig with etcd", "etcd://127.0.0.1:1/x", []string{"--kubeconfig", deadKC, "/x"}, exitUsage},
		{"tls with k8s", "k8s://", []string{"--tls", "--kubeconfig", deadKC, "ns/x"}, exitUsage},
		{"no kubeconfig", "k8s://", []string{"--kubeconfig", filepath.Join(dir, "missing"), "ns/x"}, exitUsage},
		{"path name", "k8s://", []string{"--kubeconfig", deadKC, "/cron/nightly"}, exitUsage},
		{"fraction ttl", "k8s://", []string{"--kubeconfig", deadKC, "--ttl", "1500ms", "ns/x"}, exitUsage},
		{"unreachable", "k8s://", []string{"--kubeconfig", deadKC, "--connect-timeout", "2s", "ns/x"}, exitUnavailable},
		{"forbidden", "k8s://", []string{"--kubeconfig", kubeconfig(t, c.ConfigFor(k8stest.User)), ns + "/x"}, exitSoftware},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"lock", "--wait", "0"}, tc.args...), "--", "true")
			p := startOn(t, tc.servers, dir, args...)
			if got := p.wait(60 * time.Second); got != tc.want {
				t.Errorf("exit %d, want %d:\n%s", got, tc.want, p.stderr)
			}
			noSecret(t, p)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if l, err := c.Client(t).CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("Leases left in %s: %v (%v)", ns, l, err)
	}
}

// TestMetricsEndpointK8s: lock --metrics-addr on Kubernetes, as on the
// other backends (checkMetricsEndpoint).
func TestMetricsEndpointK8s(t *testing.T) {
	t.Parallel()
	c := k8stest.Shared(t)
	ns := k8stest.Namespace(t, c)
	checkMetricsEndpoint(t, "k8s://", ns+"/cli-metrics", "--kubeconfig", kubeconfig(t, c.Config()), "--ttl", "3s")
}

// TestHolderViewK8s: inspect and elect --observe on Kubernetes, as on the
// other backends (checkHolderView).
func TestHolderViewK8s(t *testing.T) {
	t.Parallel()
	c := k8stest.Shared(t)
	ns := k8stest.Namespace(t, c)
	checkHolderView(t, "k8s://", ns+"/cli-holder", []string{"--kubeconfig", kubeconfig(t, c.Config())}, "--ttl", "3s")
}
