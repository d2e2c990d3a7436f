package k8slease_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/testkit/leadtest"
)

// The kubeconfig and namespace of TestHealthStoppedLeaderChild.
const (
	envStoppedChild   = "K8SLEASE_TEST_STOPPED_CHILD_KUBECONFIG"
	envStoppedChildNS = "K8SLEASE_TEST_STOPPED_CHILD_NAMESPACE"
)

// TestHealthStoppedLeader is leadtest.StoppedLeader on Kubernetes: a
// leader process on a lease of testDuration, stopped (SIGSTOP) past it.
func TestHealthStoppedLeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := k8stest.WriteKubeconfig(kubeconfig, e.c.Config()); err != nil {
		t.Fatal(err)
	}
	s, _ := e.connect(t, k8stest.AdminUser)
	leadtest.StoppedLeader(t, "TestHealthStoppedLeaderChild",
		[]string{envStoppedChild + "=" + kubeconfig, envStoppedChildNS + "=" + e.ns}, mutex(t, s, "stopped"))
}

// TestHealthStoppedLeaderChild is the leader process of
// TestHealthStoppedLeader (it does nothing in a normal run).
func TestHealthStoppedLeaderChild(t *testing.T) {
	path := os.Getenv(envStoppedChild)
	if path == "" {
		return // not the child
	}
	cfg, err := k8slease.ConfigFromKubeconfig(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := k8slease.Connect(t.Context(), cfg, k8slease.WithLeaseDuration(testDuration),
		k8slease.WithNamespace(os.Getenv(envStoppedChildNS)), k8slease.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	leadtest.StoppedLeaderChild(t, mutex(t, s, "stopped"))
}
