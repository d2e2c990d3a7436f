package zookeeper

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// ErrReservedName is the Err of the *PathError for a path with a segment
// named like one of the recipes' queue nodes (_c_<32 hex digits>-<kind>
// <sequence>, of any kind: see name.go's grammar) or like a record a
// recipe keeps beside them ("_lock-delay", the lock-delay marker). Such a directory would be listed
// by its parent's recipe as a contender (a lock that never frees), as
// another recipe's node (recipe.ErrMixedRecipes) or as its record, so
// every recipe path, fencezk register and chroot refuses it before
// anything is sent. The error matches recipe.ErrInvalidPath too.
var ErrReservedName = errors.New("recipe: path segment named like a queue node or a recipe's record")

// PathError reports an invalid znode path. It matches recipe.ErrInvalidPath, and
// Err when set (recipe.ErrTooLarge for a path too long for the packet limit,
// ErrReservedName for a segment named like a queue node or "_lock-delay").
type PathError struct {
	Path   string // the path as given
	Reason string // what is wrong with it
	Err    error  // the kind of problem beyond recipe.ErrInvalidPath, if any
}

// Error implements error. A path longer than 200 bytes is shortened.
func (e *PathError) Error() string {
	p := fmt.Sprintf("%q", e.Path)
	if len(e.Path) > 200 {
		p = fmt.Sprintf("%q… (%d bytes)", e.Path[:64], len(e.Path))
	}
	return fmt.Sprintf("recipe: invalid path %s: %s", p, e.Reason)
}

// errorf is fmt.Errorf for an error of this package that wraps others of
// it: the message names the package once ("recipe: invalid option: request
// over the server's size limit: ..."), dropping the "recipe: " prefix of
// every wrapped error's message after the first (or after the format's own
// prefix). errors.Is and errors.As see every wrapped error, as with
// fmt.Errorf.
func errorf(format string, args ...any) error {
	shown := make([]any, len(args))
	seen := strings.HasPrefix(format, prefix)
	for i, a := range args {
		shown[i] = a
		if e, ok := a.(error); ok {
			if seen {
				shown[i] = unprefixed(e)
			}
			seen = true
		}
	}
	return &prefixedOnce{err: fmt.Errorf(format, args...), msg: fmt.Sprintf(strings.ReplaceAll(format, "%w", "%v"), shown...)}
}

// prefix starts the message of every error of this package.
const prefix = "recipe: "

// unprefixed is err's message without a leading prefix.
func unprefixed(err error) string { return strings.TrimPrefix(err.Error(), prefix) }

// prefixedOnce is an error of errorf.
type prefixedOnce struct {
	err error // what fmt.Errorf made of it: the wrapping
	msg string
}

func (e *prefixedOnce) Error() string { return e.msg }
func (e *prefixedOnce) Unwrap() error { return e.err }

// Unwrap returns recipe.ErrInvalidPath and Err (when set), which the
// error matches.
func (e *PathError) Unwrap() []error {
	if e.Err == nil {
		return []error{recipe.ErrInvalidPath}
	}
	return []error{recipe.ErrInvalidPath, e.Err}
}

// zkError is the Err of every *recipe.OpError of this package: it makes
// ZooKeeper's ACL refusals (zk.ErrNoAuth, zk.ErrInvalidACL,
// zk.ErrAuthFailed) match recipe.ErrNoPermission, and a request that
// go-zookeeper could not fit in its send buffer (zk.ErrShortBuffer: sized
// to the packet limit, see WithMaxPacket) match recipe.ErrTooLarge. Its
// message is the wrapped error's.
type zkError struct{ error }

// Unwrap returns the wrapped error.
func (e zkError) Unwrap() error { return e.error }

// Is reports the matches described on zkError.
func (e zkError) Is(target error) bool {
	switch target {
	case recipe.ErrNoPermission:
		return errors.Is(e.error, zk.ErrNoAuth) || errors.Is(e.error, zk.ErrInvalidACL) || errors.Is(e.error, zk.ErrAuthFailed)
	case recipe.ErrTooLarge:
		return errors.Is(e.error, zk.ErrShortBuffer)
	}
	return false
}
