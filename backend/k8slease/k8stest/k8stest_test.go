package k8stest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestMain(m *testing.M) { Main(m) }

// clientFor makes a clientset of cfg or fails t.
func clientFor(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// newLease is a Lease named name held by holder.
func newLease(name, holder string) *coordinationv1.Lease {
	secs := int32(15)
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs}}
}

// ctxT is a context for one step of a test.
func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestSharedLeaseRBAC: the shared cluster is ready, the admin creates a
// Lease with client-go; User and OtherUser may do nothing until a Role
// bound to User lets it, and then only User may.
func TestSharedLeaseRBAC(t *testing.T) {
	c := Shared(t)
	ns := Namespace(t, c)
	ctx := ctxT(t, 30*time.Second)
	admin := c.Client(t)
	if _, err := admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	got, err := admin.CoordinationV1().Leases(ns).Create(ctx, newLease("a", "admin"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("admin creates a Lease: %v", err)
	}
	if *got.Spec.HolderIdentity != "admin" || got.ResourceVersion == "" {
		t.Fatalf("created Lease %+v", got.Spec)
	}
	user, other := clientFor(t, c.ConfigFor(User)), clientFor(t, c.ConfigFor(OtherUser))
	if _, err := user.CoordinationV1().Leases(ns).Create(ctx, newLease("u", User), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("User creates a Lease with no Role: %v, want Forbidden", err)
	}
	grantLeases(t, admin, ns, User)
	// RBAC's authorizer sees the new binding through its informer: an
	// instant later.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = user.CoordinationV1().Leases(ns).Create(ctx, newLease("u", User), metav1.CreateOptions{})
		if err == nil || !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("User creates a Lease with the Role: %v", err)
	}
	if _, err := other.CoordinationV1().Leases(ns).Get(ctx, "u", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("OtherUser reads the Lease: %v, want Forbidden", err)
	}
}

// grantLeases binds a Role on Leases of ns to user.
func grantLeases(t testing.TB, admin kubernetes.Interface, ns, user string) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "leases"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		Verbs: []string{"get", "list", "watch", "create", "update", "delete"}}}}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "leases-" + user},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "leases"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestKubeconfig: WriteKubeconfig writes a file only its owner can read
// through which a client reaches the cluster as the same user; the
// configurations print no token.
func TestKubeconfig(t *testing.T) {
	c := Shared(t)
	ns := Namespace(t, c)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := WriteKubeconfig(path, c.ConfigFor(User)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig %v, %v; want mode 0600", fi, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = clientFor(t, cfg).CoordinationV1().Leases(ns).List(ctxT(t, 30*time.Second), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), User) {
		t.Fatalf("list as the kubeconfig's user: %v, want Forbidden naming %s", err, User)
	}
	for _, s := range []string{fmt.Sprint(c.Config()), fmt.Sprintf("%+v", c.ConfigFor(User)), fmt.Sprintf("%#v", c.Config())} {
		if strings.Contains(s, "s3cr3t") {
			t.Fatal("a printed configuration holds a token")
		}
	}
}

// TestExternal: with K8S_TEST_KUBECONFIG the cluster is the named one,
// whose process faults are unsupported; the non-admin users are
// impersonated (Forbidden names them), and Close leaves the cluster up.
func TestExternal(t *testing.T) {
	own := Shared(t)
	ns := Namespace(t, own)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := WriteKubeconfig(path, own.Config()); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvKubeconfig, path)
	ext := Start(t)
	if !ext.External() || ext.Host() != own.Host() {
		t.Fatalf("external cluster %s (external %v), want %s", ext.Host(), ext.External(), own.Host())
	}
	for name, err := range map[string]error{"KillAPIServer": ext.KillAPIServer(), "PauseAPIServer": ext.PauseAPIServer(),
		"KillEtcd": ext.KillEtcd(), "RestartEtcd": ext.RestartEtcd(context.Background())} {
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s on an external cluster: %v, want ErrUnsupported", name, err)
		}
	}
	ctx := ctxT(t, 30*time.Second)
	if _, err := clientFor(t, ext.Config()).CoordinationV1().Leases(ns).Create(ctx, newLease("x", "x"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin of the external cluster: %v", err)
	}
	_, err := clientFor(t, ext.ConfigFor(OtherUser)).CoordinationV1().Leases(ns).Get(ctx, "x", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), OtherUser) {
		t.Fatalf("impersonated OtherUser: %v, want Forbidden naming it", err)
	}
	if err := ext.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := own.Client(t).CoordinationV1().Leases(ns).Get(ctx, "x", metav1.GetOptions{}); err != nil {
		t.Fatalf("the cluster after the external Cluster's Close: %v", err)
	}
}

// TestNoBinary: with no binary (and no cluster named), Launch fails at
// once with ErrNoServer and the install hint.
func TestNoBinary(t *testing.T) {
	t.Setenv(EnvKubeconfig, "")
	t.Setenv(EnvBinary, filepath.Join(t.TempDir(), "kube-apiserver"))
	start := time.Now()
	_, err := Launch(context.Background())
	if !errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), "run scripts/kube-apiserver.sh") {
		t.Fatalf("Launch with a missing binary: %v, want ErrNoServer with the hint", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Launch took %v to fail, want at once", d)
	}
}
