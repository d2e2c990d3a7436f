package k8slease

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// PermissionError is the error (inside a *recipe.OpError) of an acquisition
// when the API server's authorization refuses the Session's user a verb the
// lock needs on its Lease: before the first grant, where Verbs lists every
// one missing of get, watch and update; or at a request (create, or a
// renewal's update, the cause of the lease's end). Err is the server's
// refusal (nil when its access review said no). It matches
// recipe.ErrNoPermission. The package documentation gives the Role.
type PermissionError struct {
	Verbs     []string
	Namespace string
	Name      string
	Err       error
}

// Error names the verbs, the Lease and the namespace; it says so when the
// namespace may not exist either (the user can't tell).
func (e *PermissionError) Error() string {
	msg := fmt.Sprintf("k8slease: the user may not %s the Lease %q in namespace %q (the Role needs get, watch, create and update on leases.coordination.k8s.io)",
		strings.Join(e.Verbs, ", "), e.Name, e.Namespace)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns recipe.ErrNoPermission and the server's refusal.
func (e *PermissionError) Unwrap() []error {
	if e.Err == nil {
		return []error{recipe.ErrNoPermission}
	}
	return []error{recipe.ErrNoPermission, e.Err}
}

// refused returns the *PermissionError of verb on the lock's Lease for err,
// a refusal (403) of the server.
func (m *Mutex) refused(verb string, err error) error {
	return &PermissionError{Verbs: []string{verb}, Namespace: m.namespace, Name: m.name, Err: err}
}

// checkedVerbs are the verbs checked before a lock's first grant, as its
// requests are authorized: by the Lease's name (a watch with a field
// selector on metadata.name is). create is not: it cannot be narrowed by
// name (a Role may leave it out when the Leases are made beforehand), and
// its refusal leaves nothing behind.
var checkedVerbs = []string{"get", "watch", "update"}

// checkRights asks the API server, once per Session and Lease, whether the
// user may do what the lock does (a SelfSubjectAccessReview per verb,
// which every authenticated user may send), so that a Role without update
// fails the acquisition at once instead of granting a lock whose renewals
// are refused, and one without watch instead of retrying refused watches.
// A review the server can't answer (no such API, the review refused) is
// skipped: the requests then tell. A denial is not remembered: a binding
// made later is honoured at the next acquisition.
func (m *Mutex) checkRights(ctx context.Context) error {
	s := m.s
	rc := restClient(s.cli)
	if rc == nil || s.rightsChecked(m.path) {
		return nil
	}
	ctx, cancel := s.life.Bind(ctx) // Close ends the reviews (recipe.ErrSessionClosed)
	defer cancel()
	var missing []string
	for _, verb := range checkedVerbs {
		ok, err := m.review(ctx, rc, verb)
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, verb)
		}
	}
	if len(missing) > 0 {
		return m.noRights(ctx, rc, missing)
	}
	s.mu.Lock()
	s.rights[m.path] = true
	s.mu.Unlock()
	return nil
}

// rightsChecked reports whether the rights on the Lease of path were found
// granted before.
func (s *Session) rightsChecked(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rights[path]
}

// restClient returns cli's REST client, or nil for a client without one
// (a test double).
func restClient(cli interface{ RESTClient() rest.Interface }) rest.Interface {
	rc := cli.RESTClient()
	if c, ok := rc.(*rest.RESTClient); rc == nil || ok && c == nil {
		return nil
	}
	return rc
}

// review asks whether the user may do verb on the lock's Lease, retrying
// transient errors until ctx ends; an unanswerable review counts as
// allowed.
func (m *Mutex) review(ctx context.Context, rc rest.Interface, verb string) (bool, error) {
	body, err := json.Marshal(&authzv1.SelfSubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SelfSubjectAccessReview"},
		Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: m.namespace, Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: m.name,
		}},
	})
	if err != nil {
		return false, err
	}
	b := loop.BackOff(retryFirst, retryMax)
	for {
		tctx, cancel := context.WithTimeout(ctx, attemptTimeout(m.s.cfg.duration))
		raw, err := rc.Post().AbsPath("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").
			SetHeader("Content-Type", "application/json").Body(body).DoRaw(tctx)
		cancel()
		var out authzv1.SelfSubjectAccessReview
		switch {
		case err == nil && json.Unmarshal(raw, &out) == nil:
			return out.Status.Allowed, nil
		case ctx.Err() != nil:
			return false, context.Cause(ctx)
		case err == nil || !transient(err):
			m.s.log.Debug("k8slease: access review unanswered; the requests will tell", "lock", m.path, "verb", verb, "error", err)
			return true, nil
		}
		if loop.Pause(ctx, b, retryMax) != nil {
			return false, context.Cause(ctx)
		}
	}
}

// noRights is the error of a lock whose user lacks the verbs missing: a
// *PermissionError, unless the namespace can be read and does not exist
// (ErrNoNamespace). A user who may not read it either can't tell, and is
// told so.
func (m *Mutex) noRights(ctx context.Context, rc rest.Interface, missing []string) error {
	perr := &PermissionError{Verbs: missing, Namespace: m.namespace, Name: m.name}
	tctx, cancel := context.WithTimeout(ctx, attemptTimeout(m.s.cfg.duration))
	defer cancel()
	_, err := rc.Get().AbsPath("/api/v1/namespaces", m.namespace).DoRaw(tctx)
	switch {
	case apierrors.IsNotFound(err):
		return noNamespace(m, "check rights", err)
	case apierrors.IsForbidden(err):
		perr.Err = fmt.Errorf("the user may not read namespace %q either: it may not exist", m.namespace)
	}
	return &recipe.OpError{Op: "check rights", Path: m.path, Err: perr}
}

// noNamespace is the error of a lock whose namespace does not exist.
func noNamespace(m *Mutex, op string, err error) error {
	return &recipe.OpError{Op: op, Path: m.path, Err: fmt.Errorf("%w %q: %w", ErrNoNamespace, m.namespace, err)}
}
