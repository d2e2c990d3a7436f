package k8stest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/k8slease/internal/conntrack"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// externalTimeout bounds Launch's check of the cluster of
// K8S_TEST_KUBECONFIG.
const externalTimeout = 10 * time.Second

// external names the cluster of the kubeconfig at path (its current
// context), once its /readyz answers ok.
func external(ctx context.Context, path string) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	c := &Cluster{external: true, admin: cfg, conns: conntrack.New(nil)}
	if cfg.Dial == nil {
		cfg.Dial = c.conns.Dial
	}
	ctx, cancel := context.WithTimeout(ctx, externalTimeout)
	defer cancel()
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err == nil {
		_, err = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	}
	if err != nil {
		c.conns.CloseAll()
		return nil, fmt.Errorf("/readyz: %w", err)
	}
	return c, nil
}

// WriteKubeconfig writes cfg (one of Config, ConfigFor, ProxiedConfig) as a
// kubeconfig file at path (mode 0600: it holds the user's token), with one
// context, "k8stest", its current one: for the command line tool and other
// processes. It fails on a file system error.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	const name = "k8stest"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
		TLSServerName:            cfg.ServerName,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
		ClientCertificate:     cfg.CertFile,
		ClientCertificateData: cfg.CertData,
		ClientKey:             cfg.KeyFile,
		ClientKeyData:         cfg.KeyData,
		Impersonate:           cfg.Impersonate.UserName,
		ImpersonateGroups:     cfg.Impersonate.Groups,
		Exec:                  cfg.ExecProvider,
		AuthProvider:          cfg.AuthProvider,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("k8stest: writing the kubeconfig: %w", err)
	}
	return nil
}

// Namespace creates a namespace that no other test uses ("k8stest-<random>")
// and deletes it at the test's cleanup, unless the cluster is closed by
// then (on a local cluster, which runs no namespace controller, a deleted
// namespace stays Terminating until the cluster closes: no new object can
// be made in it). It fails tb if the namespace can't be created.
func Namespace(tb testing.TB, c *Cluster) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "k8stest-" + hex.EncodeToString(b[:])
	cs := c.Client(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("k8stest: creating namespace %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if c.closed.Load() { // gone with the cluster
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			tb.Errorf("k8stest: deleting namespace %s: %v", name, err)
		}
	})
	return name
}
