// Package lockname holds the one rule for the lock names of the backends
// (backend/etcdlock, backend/pglock, backend/redislock) and the error they
// return for a name they refuse, so that every backend checks, words and
// shortens the same way.
//
// Every backend accepts a name that is not empty, is valid UTF-8, holds no
// NUL byte and is at most the backend's MaxNameLen bytes long; a backend
// adds a restriction of its own only where its key layout needs one
// (Rules.Extra).
package lockname

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Error reports a lock name a backend refuses. It matches
// recipe.ErrInvalidPath, and Err when set.
type Error struct {
	Backend string // the package that refused it: "etcdlock", "pglock", "redislock"
	Name    string // the name as given
	Reason  string // what is wrong with it
	Err     error  // the backend's own sentinel, if it has one (etcdlock.ErrInvalidName)
}

// Error implements error. A name longer than 200 bytes is shortened as
// shortpath.Of shortens a path (Quote).
func (e *Error) Error() string {
	return fmt.Sprintf("%s: invalid lock name %s: %s", e.Backend, Quote(e.Name), e.Reason)
}

// Is makes an *Error match recipe.ErrInvalidPath.
func (e *Error) Is(target error) bool { return target == recipe.ErrInvalidPath }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Quote returns name quoted (strconv.Quote), or, when shortpath.Of
// would shorten it (over 200 bytes), its first 64 bytes quoted, "…" and its
// length: an error about a 10 MiB name stays a line long.
func Quote(name string) string {
	if shortpath.Of(name) == name {
		return strconv.Quote(name)
	}
	return fmt.Sprintf("%q… (%d bytes)", name[:64], len(name))
}

// Rules are one backend's lock-name rules: the shared ones, with its length
// limit, and its own restriction if any.
type Rules struct {
	Backend string // the package name, which starts every message
	MaxLen  int    // the backend's MaxNameLen, in bytes
	// Extra, if set, returns why the backend refuses a name that passed
	// the shared rules ("" if it accepts it).
	Extra func(name string) string
	Err   error // set as every Error's Err
}

// Check returns nil if name is a lock name under r, else an *Error.
func (r Rules) Check(name string) error {
	why := ""
	switch {
	case name == "":
		why = "empty"
	case len(name) > r.MaxLen:
		why = fmt.Sprintf("%d bytes, longer than %s.MaxNameLen (%d)", len(name), r.Backend, r.MaxLen)
	case !utf8.ValidString(name):
		why = "not valid UTF-8"
	case strings.IndexByte(name, 0) >= 0:
		why = "contains a NUL byte"
	case r.Extra != nil:
		why = r.Extra(name)
	}
	if why == "" {
		return nil
	}
	return &Error{Backend: r.Backend, Name: name, Reason: why, Err: r.Err}
}
