package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// k8sNamespace is the namespace of the k8s peer's Leases.
const k8sNamespace = "zkbench"

// startK8s starts the k8s peer's cluster (k8stest.Launch: a local
// kube-apiserver over its own etcd, or K8S_TEST_KUBECONFIG's cluster) and
// returns how to connect a client, each a k8slease Session of the admin
// with a lease duration of sessionTimeout, and how to stop the cluster.
// A lock's path ("/bench/k8s/loop-1") names the Lease
// "bench.k8s.loop-1" of namespace zkbench.
func startK8s(ctx context.Context, discard *slog.Logger) (func(context.Context) (goClient, error), func(), error) {
	c, err := k8stest.Launch(ctx)
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(c.Config())
	if err == nil {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k8sNamespace}}
		_, err = cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	}
	if err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("k8s peer: namespace %s: %w", k8sNamespace, err)
	}
	connect := func(ctx context.Context) (goClient, error) {
		s, err := k8slease.Connect(ctx, c.Config(), k8slease.WithLeaseDuration(sessionTimeout),
			k8slease.WithNamespace(k8sNamespace), k8slease.WithLogger(discard))
		if err != nil {
			return nil, err
		}
		mk := func(p string) (recipe.Lock, error) {
			return k8slease.New(s, strings.ReplaceAll(strings.Trim(p, "/"), "/", "."))
		}
		return lockClient{mk: mk, end: func() { _ = s.Close() }}, nil
	}
	return connect, func() { _ = c.Close() }, nil
}
