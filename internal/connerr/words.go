package connerr

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/ctxend"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The words of a failed connect are the same on every backend
// (docs/backends.md, "Errors at connect"): "recipe: connect: server
// unreachable: ..." and "recipe: connect: refused by the server's access
// control: ...", each a *recipe.OpError of the connect.

// Refusal is the one wording, on every backend, of a server's refusal of
// the client's credentials at connect (a password, a user or role, a
// token, an auth scheme): a *recipe.OpError of "connect" that reads
// "recipe: connect: refused by the server's access control: " and err's
// text (without its own "recipe: "), and matches recipe.ErrNoPermission
// and all that err matches. err must hold no secret (scrubbed already).
func Refusal(err error) error {
	return &recipe.OpError{Op: "connect", Err: &refusal{err}}
}

// refusal is Refusal's error: err, worded as a refusal.
type refusal struct{ err error }

func (r *refusal) Error() string {
	return recipe.ErrNoPermission.Error() + ": " + strings.TrimPrefix(r.err.Error(), "recipe: ")
}
func (r *refusal) Unwrap() []error { return []error{recipe.ErrNoPermission, r.err} }

// unreachableWords are recipe.ErrUnreachable's, without "recipe: ".
var unreachableWords = strings.TrimPrefix(recipe.ErrUnreachable.Error(), "recipe: ")

// TimedOut is the one answer, on every backend, of a connect whose ctx's
// deadline passed before any server answered (the caller tells: err holds
// no server answer): a *recipe.OpError of the connect, reading "recipe:
// connect: server unreachable: ...", that matches recipe.ErrUnreachable
// and ctx's cause (context.DeadlineExceeded) both, and all err matches.
// It returns err itself when ctx's deadline has not passed (a cancelled
// ctx answers with its cause alone), or when err matches
// recipe.ErrUnreachable and says so already.
func TimedOut(ctx context.Context, err error) error {
	if err == nil || !ctxend.Ended(ctx) || errors.Is(ctx.Err(), context.Canceled) ||
		errors.Is(err, recipe.ErrUnreachable) && strings.Contains(err.Error(), unreachableWords) {
		return err
	}
	cause := ctxend.Cause(ctx)
	if errors.Is(err, cause) {
		return &recipe.OpError{Op: "connect", Err: fmt.Errorf("%w: %w", recipe.ErrUnreachable, err)}
	}
	return &recipe.OpError{Op: "connect", Err: fmt.Errorf("%w: %w (%w)", recipe.ErrUnreachable, cause, err)}
}
