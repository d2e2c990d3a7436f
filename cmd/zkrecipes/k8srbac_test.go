package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// bindLeaseRole gives k8stest.User a Role of verbs on leases in ns and
// waits until the authorizer applies it.
func bindLeaseRole(t *testing.T, c *k8stest.Cluster, ns string, verbs ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rbac := c.Client(t).RbacV1()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "zkrecipes-k8slease"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: verbs}},
	}
	if _, err := rbac.Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: k8stest.User}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(c.ConfigFor(k8stest.User))
	if err != nil {
		t.Fatal(err)
	}
	serverkit.Eventually(t, 20*time.Second, "the Role applied", func() bool {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
				Namespace: ns, Verb: verbs[0], Group: "coordination.k8s.io", Resource: "leases"}},
		}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed
	})
}

// TestLockK8sRoleWithoutUpdate: a user whose Role lacks update is refused
// before the grant, exit 70 as docs/cli.md says, with the missing verb
// named; the command never runs and no Lease is made (the old code granted
// it, lost it 2 s later as a "connection suspended" and exited 79).
func TestLockK8sRoleWithoutUpdate(t *testing.T) {
	t.Parallel()
	c := k8stest.Shared(t)
	ns := k8stest.Namespace(t, c)
	bindLeaseRole(t, c, ns, "get", "watch", "create")
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	p := startOn(t, "k8s://", dir, "lock", "--kubeconfig", kubeconfig(t, c.ConfigFor(k8stest.User)), "--ttl", "3s",
		"--wait", "0", ns+"/no-update", "--", "touch", ran)
	if got := p.wait(60 * time.Second); got != exitSoftware {
		t.Fatalf("exit %d, want %d:\n%s", got, exitSoftware, p.stderr)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran")
	}
	if !strings.Contains(p.stderr.String(), "may not update") {
		t.Errorf("the missing verb is not named:\n%s", p.stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if l, err := c.Client(t).CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("Leases left in %s: %v (%v)", ns, l, err)
	}
	noSecret(t, p)
}

// TestK8sZooKeeperOnly: elect (campaigning) with --servers k8s:// says
// first that it works with ZooKeeper only (not that --kubeconfig is unknown
// or that the lock name is no absolute path); the help of elect and inspect
// names k8s:// (their --observe and holder view work with it).
// lock's refusals of a bad Lease name read as sentences, and a 1 s --ttl
// is warned about.
func TestK8sZooKeeperOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"elect", "--kubeconfig", "/nowhere", "ns/x", "--id", "a", "--", "true"},
		{"elect", "ns/x", "--id", "a", "--", "true"},
	} {
		p := startOn(t, "k8s://", dir, args...)
		if got := p.wait(30 * time.Second); got != exitUsage || !strings.Contains(p.stderr.String(), "works with ZooKeeper only") {
			t.Errorf("%q: exit %d, want %d saying ZooKeeper only:\n%s", args, got, exitUsage, p.stderr)
		}
	}
	for _, cmd := range []string{"elect", "inspect"} {
		p := startOn(t, "k8s://", dir, cmd, "--help")
		if p.wait(30*time.Second) != 0 || !strings.Contains(p.stdout.String(), "redis:// or k8s://") {
			t.Errorf("%s --help does not name k8s://:\n%s", cmd, p.stdout)
		}
	}
	for name, want := range map[string]string{
		"a/b/c":    `more than one "/"`,
		"ns/Upper": `the Lease name "Upper" is not a DNS subdomain`,
		"Bad/x":    `the namespace "Bad" is not a DNS label`,
	} {
		p := startOn(t, "k8s://", dir, "lock", "--kubeconfig", "/nowhere", name, "--", "true")
		got := p.wait(30 * time.Second)
		if r := p.logged("cannot use the lock name"); got != exitUsage || r == nil || !strings.Contains(fmt.Sprint(r["err"]), want) {
			t.Errorf("lock %q: exit %d, want %d saying %q:\n%s", name, got, exitUsage, want, p.stderr)
		}
	}

	c := k8stest.Shared(t)
	ns := k8stest.Namespace(t, c)
	p := startOn(t, "k8s://", dir, "lock", "--kubeconfig", kubeconfig(t, c.Config()), "--ttl", "1s", ns+"/short", "--", "true")
	p.expect(0, 60*time.Second)
	if r := p.logged("k8slease: a lease duration this short leaves little time for a slow API server (every renewal must be answered within 2/3 of it); keep it at least 5s outside tests"); r == nil || r["level"] != "WARN" {
		t.Errorf("a 1s lease was not warned about:\n%s", p.stderr)
	}
	noSecret(t, p)
}
