package fence

import (
	"context"
	"errors"
	"unicode/utf8"
)

// Fence is any resource-side check of fencing tokens: a [Guard], a SQL
// fence row (fencesql), a ZooKeeper register (fencezk), an etcd or Redis
// key (fenceetcd, fenceredis). Code that guards a write through a Fence
// (package fencehttp's handler, say) works with all of them.
type Fence interface {
	// Admit runs write if t is not lower than the highest token accepted
	// for resource, and records t as the highest when write returns nil;
	// check, write and record are one atomic step for what write does
	// through the fence (each implementation says what that covers). An
	// equal token is accepted; a nil write only records t; write runs at
	// most once, with a ctx derived from ctx. On an error t is not recorded
	// and nothing write did through the fence took effect, unless the error
	// matches [ErrUncertain]; a lower t gets a [*StaleError] and write is
	// not called. write must not call Admit on the same resource (see The
	// Fence contract in the package documentation for every error).
	Admit(ctx context.Context, resource string, t Token, write func(ctx context.Context) error) error
}

// ErrBadResource is matched by the error of a [Fence] refusing a resource
// name it cannot keep (see [CheckResource] for the names every fence of
// this module keeps).
var ErrBadResource = errors.New("fence: bad resource name")

// MaxResourceLen is the longest resource name [CheckResource] accepts, in
// bytes (fencesql's limit, the tightest of this module's fences).
const MaxResourceLen = 200

// CheckResource returns an error matching [ErrBadResource] unless name is
// one every fence of this module keeps: not empty, at most
// MaxResourceLen bytes, valid UTF-8, no NUL byte. Check a name taken from
// untrusted input (an HTTP request) with it; an implementation may refuse
// more (fencezk: a path segment).
func CheckResource(name string) error {
	switch {
	case name == "":
		return &resourceError{why: "empty"}
	case len(name) > MaxResourceLen:
		return &resourceError{why: "longer than 200 bytes"}
	case !utf8.ValidString(name):
		return &resourceError{why: "not valid UTF-8"}
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return &resourceError{why: "contains a NUL byte"}
		}
	}
	return nil
}

// resourceError says why a name was refused without quoting it (it may be
// long or hostile).
type resourceError struct{ why string }

func (e *resourceError) Error() string        { return ErrBadResource.Error() + ": " + e.why }
func (e *resourceError) Is(target error) bool { return target == ErrBadResource }

// Admit makes a *Guard a [Fence]: it is [Guard.Do] with a context. write
// runs under the resource's lock, so its in-process effects are atomic
// with the check and the record, and other Admits and Dos on resource
// wait for it (that wait does not end with ctx). Admit returns ctx's error,
// without calling write or recording t, if ctx is done before write would
// be called, the lock once taken included; write gets ctx. A Guard keeps
// every resource name it has seen for ever: give it names from a bounded
// set.
func (g *Guard) Admit(ctx context.Context, resource string, t Token, write func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return g.Do(resource, t, func() error {
		if err := ctx.Err(); err != nil {
			return err // ended while waiting for the lock
		}
		if write == nil {
			return nil
		}
		return write(ctx)
	})
}

var _ Fence = (*Guard)(nil)
