package etcdlock

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/internal/lockname"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Errors of this package. Besides these, operations return the recipe
// sentinels (recipe.ErrLocked, recipe.ErrLeaseLost, recipe.ErrSessionLost,
// recipe.ErrSessionClosed, recipe.ErrNodeDeleted, recipe.ErrBadOption), the
// caller's context cause, or a *recipe.OpError wrapping the etcd client's
// error.
var (
	// ErrBadURL is matched by the error of Connect for a URL that is not of
	// the form etcd[s]://host:port[,host:port...][/prefix].
	ErrBadURL = errors.New("etcdlock: bad URL")

	// ErrUnreachable is matched by the error of Connect (and NewSession)
	// when no endpoint accepted a connection or no lease could be granted
	// before the connect timeout; the error also wraps the dial or request
	// error. It matches recipe.ErrUnreachable too, and reads as it does
	// (one wording on every backend: "recipe: connect: server unreachable:
	// ...", in the *recipe.OpError of the connect).
	ErrUnreachable error = &alias{"recipe: server unreachable", recipe.ErrUnreachable}

	// ErrBadHolder is matched by the error of Mutex.Holder when the lock's
	// first key holds a value that is no identity WithIdentity accepts
	// (another client wrote it): the state is returned with the error,
	// Held with the key's token and an empty ID. ObserveHolder delivers
	// such a state and logs it at Warn.
	ErrBadHolder = errors.New("etcdlock: malformed holder identity")

	// ErrInvalidName is matched by the error of New (a *NameError) for a
	// lock name this package refuses (see New). It matches
	// recipe.ErrInvalidPath too.
	ErrInvalidName error = &alias{"etcdlock: invalid lock name", recipe.ErrInvalidPath}
)

// NameError is the error of New and CheckName for a lock name this package
// refuses: Name is the name as given, Reason the rule it breaks. It matches
// ErrInvalidName and recipe.ErrInvalidPath; its message shows a name over
// 200 bytes as its first 64 bytes and its length. pglock and redislock
// return the same type.
type NameError = lockname.Error

// alias is a sentinel of this package that also matches a sentinel of
// package recipe, so that code written for every backend can test for the
// recipe one.
type alias struct {
	msg  string
	also error
}

func (e *alias) Error() string        { return e.msg }
func (e *alias) Is(target error) bool { return target == e.also }

// transient reports whether a failed request may succeed when sent again:
// the connection failed or the server could not serve it right now (no
// leader, timed out, overloaded). Such a request may or may not have been
// applied; every request this package retries is idempotent.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller's (or our own) bound: not the server's answer
	}
	switch grpcCode(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted, codes.Unknown:
		return true
	}
	return false
}

// grpcCode is the gRPC status code of a client error.
func grpcCode(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code()
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return codes.Unknown
}

// opError wraps a failed etcd request as a *recipe.OpError (Path is the
// key); a refusal by etcd's authentication or access control also matches
// recipe.ErrNoPermission, as on every backend (internal/connerr).
func opError(op, key string, err error) error {
	if denied(err) {
		err = connerr.Mark(err, recipe.ErrNoPermission)
	}
	return &recipe.OpError{Op: op, Path: key, Err: err}
}

// refusals are etcd's answers to a client whose credentials or rights do
// not do: no user name where authentication is on, a wrong password or
// unknown user (when a token is renewed), a token no longer valid, a role
// without the key range.
var refusals = []error{rpctypes.ErrPermissionDenied, rpctypes.ErrUserEmpty, rpctypes.ErrAuthFailed,
	rpctypes.ErrInvalidAuthToken, rpctypes.ErrAuthOldRevision, rpctypes.ErrUserNotFound, rpctypes.ErrInvalidAuthMgmt}

// denied reports whether err is one of etcd's refusals.
func denied(err error) bool {
	for _, r := range refusals {
		if errors.Is(err, r) {
			return true
		}
	}
	switch grpcCode(err) {
	case codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// lostError is what an acquisition returns when the lease its key was put
// under is lost: recipe.ErrSessionClosed after Close, else an error matching
// recipe.ErrSessionLost (and the loss's cause, such as recipe.ErrSuspended).
func lostError(cause error) error {
	if errors.Is(cause, recipe.ErrSessionClosed) || errors.Is(cause, recipe.ErrSessionLost) {
		return cause
	}
	return fmt.Errorf("%w (%w)", recipe.ErrSessionLost, cause)
}
