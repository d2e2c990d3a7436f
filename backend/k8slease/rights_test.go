package k8slease_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// bindRole gives k8stest.User the Role of verbs on leases in the env's
// namespace, and waits until the authorizer applies it (the user may do
// the first verb on the Lease name).
func bindRole(t *testing.T, e *env, name string, verbs ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	role := leaseRole(e.ns)
	role.Rules[0].Verbs = verbs
	rbac := e.in.RbacV1()
	if _, err := rbac.Roles(e.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: k8stest.User}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
	}
	if _, err := rbac.RoleBindings(e.ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitAllowed(t, e, name, verbs[0], true)
}

// awaitAllowed waits until k8stest.User may (or may not) do verb on the
// Lease name of the env's namespace, as the authorizer sees it.
func awaitAllowed(t *testing.T, e *env, name, verb string, want bool) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(e.c.ConfigFor(k8stest.User))
	if err != nil {
		t.Fatal(err)
	}
	serverkit.Eventually(t, 20*time.Second, "the Role applied", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
				Namespace: e.ns, Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: name}},
		}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed == want
	})
}

// missingVerbs returns the verbs of err's *PermissionError (failing t if it
// has none).
func missingVerbs(t *testing.T, err error) []string {
	t.Helper()
	var perr *k8slease.PermissionError
	var op *recipe.OpError
	if !errors.Is(err, recipe.ErrNoPermission) || !errors.As(err, &perr) || !errors.As(err, &op) || !recipe.Permanent(err) {
		t.Fatalf("%v: want a *recipe.OpError holding a *k8slease.PermissionError (recipe.ErrNoPermission)", err)
	}
	return perr.Verbs
}

// TestRoleWithoutUpdate: a Role without update (create allowed) fails the
// acquisition at once with a *PermissionError naming update, and creates
// nothing: a grant would see every renewal refused and end as a lost
// connection, its Lease left named for a full duration.
func TestRoleWithoutUpdate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bindRole(t, e, "no-update", "get", "watch", "create")
	s, _ := e.connect(t, k8stest.User)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := mutex(t, s, "no-update").Acquire(ctx)
	if err == nil {
		l.Release(ctx)
		t.Fatal("granted without the update right")
	}
	if v := missingVerbs(t, err); !slices.Equal(v, []string{"update"}) {
		t.Errorf("missing verbs %q, want [update]", v)
	}
	if got, err := e.get(ctx, "no-update"); got != nil || err != nil {
		t.Errorf("the Lease was created: %v %v", got, err)
	}
}

// TestRoleWithoutWatch: a Role without watch fails the acquisition at once
// (a *PermissionError naming watch) instead of retrying refused watches;
// an observer reads the Lease instead of watching it.
func TestRoleWithoutWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bindRole(t, e, "no-watch", "get", "create", "update")
	s, _ := e.connect(t, k8stest.User)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := mutex(t, s, "no-watch").TryAcquire(ctx)
	if err == nil {
		l.Release(ctx)
		t.Fatal("granted without the watch right")
	}
	if v := missingVerbs(t, err); !slices.Equal(v, []string{"watch"}) {
		t.Errorf("missing verbs %q, want [watch]", v)
	}

	// An observer without watch reads the Lease every max(D, 5 s) instead.
	ch := mutex(t, s, "no-watch").ObserveHolder(ctx)
	if st := next(t, ch); st.Held {
		t.Fatalf("observer: %v, want free", st)
	}
	admin, _ := e.connect(t, k8stest.AdminUser)
	held, err := mutex(t, admin, "no-watch").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	heldBy(t, "observer without watch", next(t, ch), admin, held)
}

// TestRightsRevoked: update taken from the Role under a holder ends its
// lease at its next renewal with a *PermissionError naming update (not as
// a lost connection), said once at Warn; watch taken away makes the holder
// say so once and stop watching, instead of retrying.
func TestRightsRevoked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bindRole(t, e, "revoked", "get", "watch", "create", "update")
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, p := e.connect(t, k8stest.User, k8slease.WithLogger(log))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := mutex(t, s, "revoked").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)

	setVerbs(t, e, "get", "create", "update")
	awaitAllowed(t, e, "revoked", "watch", false)
	p.Cut() // the holder's watch ends; it is refused when it starts again
	p.Resume()
	time.Sleep(testDuration)
	if n := strings.Count(logs.String(), "refuses to watch"); n != 1 {
		t.Errorf("the refused watch was said %d times, want once:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "watch not started"); n > 2 {
		t.Errorf("the refused watch was retried %d times in %v", n, testDuration)
	}
	if l.Context().Err() != nil {
		t.Fatalf("the lease ended without its watch: %v", context.Cause(l.Context()))
	}

	setVerbs(t, e, "get", "watch", "create")
	select {
	case <-l.Context().Done():
	case <-ctx.Done():
		t.Fatal("the lease outlived its refused renewals")
	}
	cause := context.Cause(l.Context())
	if v := missingVerbs(t, &recipe.OpError{Op: "renew", Err: cause}); !slices.Equal(v, []string{"update"}) {
		t.Errorf("cause %v, want the update refused", cause)
	}
	if errors.Is(cause, recipe.ErrSuspended) {
		t.Errorf("cause %v: a refusal is not a lost connection", cause)
	}
	// The loss is logged just after the context ends.
	serverkit.Eventually(t, 5*time.Second, "the loss logged", func() bool { return strings.Contains(logs.String(), "may not update") })
	if n := strings.Count(logs.String(), "may not update"); n != 1 {
		t.Errorf("the refused renewal was logged %d times, want once:\n%s", n, logs.String())
	}
}

// setVerbs changes the verbs of the env's Role.
func setVerbs(t *testing.T, e *env, verbs ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	role := leaseRole(e.ns)
	role.Rules[0].Verbs = verbs
	if _, err := e.in.RbacV1().Roles(e.ns).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestMissingNamespaceLeader: README's leader.Run program on a lock in a
// namespace that does not exist returns ErrNoNamespace (permanent) instead
// of retrying forever; a user whose Role is in another namespace gets a
// *PermissionError that names the namespace and says it may not exist.
func TestMissingNamespaceLeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t, k8stest.AdminUser)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := leader.Run(ctx, mutex(t, s, "no-such-namespace-zkr/lock"), func(ctx context.Context, _ fence.Token) error {
		t.Error("led in a namespace that does not exist")
		return nil
	}, leader.WithLogger(quiet))
	if !errors.Is(err, k8slease.ErrNoNamespace) || !recipe.Permanent(err) || ctx.Err() != nil ||
		!strings.Contains(err.Error(), `"no-such-namespace-zkr"`) {
		t.Errorf("leader.Run in a missing namespace: %v, want k8slease.ErrNoNamespace naming it, at once", err)
	}

	bindRole(t, e, "lock", "get", "watch", "create", "update")
	limited, _ := e.connect(t, k8stest.User)
	_, err = mutex(t, limited, "no-such-namespace-zkr/lock").Acquire(ctx)
	missingVerbs(t, err)
	if msg := err.Error(); !strings.Contains(msg, `namespace "no-such-namespace-zkr"`) || !strings.Contains(msg, "may not exist") {
		t.Errorf("a user limited to another namespace: %q, want the namespace named and said maybe missing", msg)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use (a log's sink).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
