package k8slease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// leaseRole is the exact Role the backend needs (docs/backends.md): get,
// watch, create and update of Leases; no list, no delete, no patch.
func leaseRole(ns string) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "zkrecipes-k8slease"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"coordination.k8s.io"},
			Resources: []string{"leases"},
			Verbs:     []string{"get", "watch", "create", "update"},
		}},
	}
}

// TestExactRole grants a user without rights the documented Role and runs
// the lock with it (a grant that creates the Lease, a waiter woken by its
// watch, renewals, releases, a TryAcquire refused), while another user
// without the Role is refused with recipe.ErrNoPermission.
func TestExactRole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rbac := e.in.RbacV1()
	if _, err := rbac.Roles(e.ns).Create(ctx, leaseRole(e.ns), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "zkrecipes-k8slease"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: k8stest.User}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "zkrecipes-k8slease"},
	}
	if _, err := rbac.RoleBindings(e.ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s1, _ := e.connect(t, k8stest.User)
	s2, _ := e.connect(t, k8stest.User)
	m1, m2 := mutex(t, s1, "rbac"), mutex(t, s2, "rbac")
	var l1 interface{ Release(context.Context) error }
	// RBAC bindings take effect at once on a fresh apiserver, but allow a
	// moment for the authorizer's informer to see the new binding.
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := m1.Acquire(ctx)
		if err == nil {
			l1 = l
			break
		}
		if !errors.Is(err, recipe.ErrNoPermission) || time.Now().After(deadline) {
			t.Fatalf("acquire with the Role: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := m2.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire of a held lock: %v", err)
	}
	waiter := grantAfter(ctx, m2)
	time.Sleep(testDuration) // renewals
	released := time.Now()
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	g := <-waiter
	if g.err != nil {
		t.Fatal(g.err)
	}
	if woke := g.at.Sub(released); woke > testDuration/2 {
		t.Errorf("the waiter was granted %v after the release: its watch did not wake it", woke)
	}
	if err := g.l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	other, _ := e.connect(t, k8stest.OtherUser)
	_, err := mutex(t, other, "rbac").TryAcquire(ctx)
	var op *recipe.OpError
	if !errors.Is(err, recipe.ErrNoPermission) || !errors.As(err, &op) {
		t.Errorf("a user without the Role: %v, want an *OpError matching recipe.ErrNoPermission", err)
	}
	_ = k8slease.DefaultNamespace
}
