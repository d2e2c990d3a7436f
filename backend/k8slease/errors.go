package k8slease

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/internal/lockname"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Errors of this package. Besides these, operations return the recipe
// sentinels (recipe.ErrLocked, recipe.ErrLeaseLost, recipe.ErrSessionClosed,
// recipe.ErrNodeDeleted, recipe.ErrBadOption), the caller's context cause,
// or a *recipe.OpError wrapping the client-go error.
var (
	// ErrUnreachable is matched by the error of Connect and NewSession when
	// the API server did not answer within the connect timeout. It matches
	// recipe.ErrUnreachable too, and reads as it does (one wording on every
	// backend: "recipe: connect: server unreachable: ...", in the
	// *recipe.OpError of the connect).
	ErrUnreachable error = &alias{"recipe: server unreachable", recipe.ErrUnreachable}

	// ErrInvalidName is matched by the error of New (a *NameError) for a
	// Lease name that is not a DNS subdomain (RFC 1123) of at most 253
	// bytes. It matches recipe.ErrInvalidPath too.
	ErrInvalidName error = &alias{"k8slease: invalid Lease name", recipe.ErrInvalidPath}

	// ErrInvalidNamespace is matched by the error of New (a *NameError)
	// for a namespace that is not a DNS label (RFC 1123) of at most 63
	// bytes. It matches recipe.ErrInvalidPath too.
	ErrInvalidNamespace error = &alias{"k8slease: invalid namespace", recipe.ErrInvalidPath}

	// ErrNoNamespace is matched by the error of an acquisition whose Lease's
	// namespace does not exist (the create's 404, or the namespace read when
	// the user's rights are refused there). It matches recipe.ErrInvalidPath
	// too: retrying does not cure it (recipe.Permanent), and leader.Run
	// returns it.
	ErrNoNamespace error = &alias{"k8slease: no such namespace", recipe.ErrInvalidPath}

	// ErrBadResourceVersion is matched by the error of an acquisition when
	// the API server answers a resourceVersion that is not a decimal
	// number: its storage is not etcd, and the fencing token (see the
	// package doc) can't be had from it.
	ErrBadResourceVersion = errors.New("k8slease: resourceVersion is not an etcd revision")

	// ErrBadRecord is matched by the error of Mutex.Holder (and logged by
	// ObserveHolder) when the Lease's TokenAnnotation names its holder with
	// something that is not the token of its grant: not a decimal number,
	// or past the Lease's resourceVersion (or, to ObserveHolder, not past a
	// version that named another holder). Only a writer other than the
	// holder puts it there; the holder's next renewal writes it again.
	ErrBadRecord = errors.New("k8slease: malformed Lease record")
)

// NameError is the error of New and CheckName for a lock this package
// refuses: Name is the "namespace/name" as given, Reason the rule it
// breaks. It matches ErrInvalidName or ErrInvalidNamespace, and
// recipe.ErrInvalidPath. The other backends return the same type.
type NameError = lockname.Error

// alias is a sentinel of this package that also matches one of package
// recipe, so that code written for every backend can test for the latter.
type alias struct {
	msg  string
	also error
}

func (e *alias) Error() string        { return e.msg }
func (e *alias) Is(target error) bool { return target == e.also }

// transient reports whether a failed request may succeed when sent again:
// no answer (a connection error, our own per-try timeout) or an answer
// that says "not now" (a timeout, 429 from API priority and fairness, 5xx).
// A write that failed so may or may not have been applied.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return true // no answer from the server: the connection, or a timeout
	}
	switch st.Status().Code {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusRequestTimeout:
		return true
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
}

// opError wraps a failed request as a *recipe.OpError (Path is the lock's
// "namespace/name"); a refusal by authentication or authorization also
// matches recipe.ErrNoPermission, as on every backend.
func opError(op, path string, err error) error {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		err = connerr.Mark(err, recipe.ErrNoPermission)
	}
	return &recipe.OpError{Op: op, Path: path, Err: err}
}

// takenError is the cause of a lease whose Lease names another holder.
func takenError(path, holder string) error {
	return fmt.Errorf("%w: Lease %s now held by %q", recipe.ErrNodeDeleted, path, holder)
}

// deletedError is the cause of a lease whose Lease was deleted.
func deletedError(path string) error {
	return fmt.Errorf("%w: Lease %s deleted", recipe.ErrNodeDeleted, path)
}

// editedError is the cause of a lease whose Lease names its holder with a
// shorter duration than the holder's: a contender trusting it (client-go's)
// could take it over before the holder's context ends.
func editedError(path string, d time.Duration) error {
	return fmt.Errorf("%w: Lease %s edited: leaseDurationSeconds %v, below the holder's", recipe.ErrNodeDeleted, path, d)
}

// lockedError is TryAcquire's error for a Lease this Session counts as
// held: it names a holder, or (cur nil) it was deleted while held.
func lockedError(path string, cur *coordv1.Lease) error {
	if cur == nil {
		return fmt.Errorf("%w: Lease %s deleted while held, counted as held for its duration after", recipe.ErrLocked, path)
	}
	return fmt.Errorf("%w: Lease %s held by %q", recipe.ErrLocked, path, holderOf(cur))
}
