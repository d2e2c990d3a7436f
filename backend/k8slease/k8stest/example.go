package k8stest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ExampleConfig returns the admin configuration of the Shared cluster and
// a namespace that no other caller gets, for Example functions (which have
// no testing.TB). It panics, with InstallHint, when no cluster can be had.
// The namespace stays until the cluster closes (Main).
func ExampleConfig() (*rest.Config, string) {
	c, err := shared.Load(func() (*Cluster, error) { return Launch(context.Background()) })
	if err != nil {
		panic(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "k8stest-example-" + hex.EncodeToString(b[:])
	cs, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	return c.Config(), name
}
