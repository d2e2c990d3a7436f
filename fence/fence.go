// Package fence provides fencing tokens and the resource-side check that makes
// a lease-based lock safe.
//
// A distributed lock is a lease: its holder can pause (GC, swap, a frozen VM)
// past its session timeout, lose the lock to another client, and resume
// believing it still holds it. No lock service can prevent the paused holder's
// late write; only the resource can reject it. Every grant of a zkrecipes lock
// therefore carries a [Token] that grows with every grant (the czxid of the
// lock's znode), and the resource keeps the highest token it has accepted and
// refuses anything older. [Guard] is that check for an in-process resource;
// packages fence/fencesql (a SQL database through database/sql) and
// fence/fencezk (data kept in a znode) make it at those resources, atomically
// with the write; docs/fencing.md says what each protects.
//
// This package has no dependency: it imports neither ZooKeeper nor SQL.
package fence

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// Token is a fencing token: a 64-bit number that grows with every grant of a
// lock. For the ZooKeeper recipes it is the czxid (creation zxid) of the znode
// that won the grant, which ZooKeeper assigns from a single, strictly
// increasing counter for the whole ensemble, so a later grant always carries a
// larger token, across lock directories and even after a directory is
// deleted and re-created.
//
// The zero Token means "no token"; it is never the token of a grant.
type Token uint64

// IsZero reports whether t is the zero ("no token") value.
func (t Token) IsZero() bool { return t == 0 }

// String formats t as a decimal number, the form [ParseToken] reads.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// ErrBadToken is returned (wrapped) by [ParseToken] for text that is not a
// token.
var ErrBadToken = errors.New("fence: malformed token")

// ParseToken parses the decimal form written by [Token.String]. It returns an
// error matching [ErrBadToken] for empty input, signs, non-digits, leading
// zeros (so that parsing and printing round-trip), values that overflow 64
// bits, and "0" (the zero token is never a grant's token).
func ParseToken(s string) (Token, error) {
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, fmt.Errorf("%w: %q", ErrBadToken, s)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%w: %q", ErrBadToken, s)
	}
	if v == 0 {
		return 0, fmt.Errorf("%w: %q is the zero token", ErrBadToken, s)
	}
	return Token(v), nil
}

// ErrStale is returned (wrapped in a [*StaleError]) when a write carries a
// token lower than one the resource has already accepted: its holder has lost
// the lock to a later holder.
var ErrStale = errors.New("fence: stale fencing token")

// ErrNoToken is returned when a write carries the zero token.
var ErrNoToken = errors.New("fence: zero fencing token")

// ErrUncertain is matched by the error of a fenced write to a remote
// resource (a database, ZooKeeper) whose request was sent but whose answer
// was lost, e.g. to a broken connection during a commit: the write may or
// may not have been applied. Read the resource to find out; writing again
// with the same token is accepted if nothing newer landed meanwhile. A
// [Guard] never returns it.
var ErrUncertain = errors.New("fence: outcome unknown")

// StaleError describes a rejected write. It matches [ErrStale] with
// errors.Is.
type StaleError struct {
	Resource string // the resource the write was aimed at
	Token    Token  // the token the write carried
	Highest  Token  // the highest token the resource had accepted
}

// Error implements error.
func (e *StaleError) Error() string {
	return fmt.Sprintf("fence: stale fencing token %s for %q: highest accepted is %s", e.Token, e.Resource, e.Highest)
}

// Is makes a *StaleError match [ErrStale].
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Guard is an in-memory fencing check for resources inside one process: it
// keeps, per resource name, the highest token accepted so far, and applies a
// write only if its token is at least that high, atomically with the check.
//
// An equal token is accepted: it is the current holder writing again.
// The zero value is ready to use; a Guard must not be copied after first use.
// All methods are safe for concurrent use.
type Guard struct {
	mu   sync.Mutex
	high map[string]*entry

	// OnStale, if set before first use, is called (outside any lock) with
	// every rejected write. Use it for metrics or logging.
	OnStale func(*StaleError)
}

type entry struct {
	mu   sync.Mutex
	high Token
}

func (g *Guard) entry(resource string) *entry {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.high == nil {
		g.high = make(map[string]*entry)
	}
	e := g.high[resource]
	if e == nil {
		e = &entry{}
		g.high[resource] = e
	}
	return e
}

// Do runs write if token is not lower than the highest token accepted for
// resource, and records token as the new highest when write returns nil.
// Check, write and record are atomic with respect to every other Do on the
// same resource (writes to one resource are serialized; different resources
// proceed in parallel).
//
// Errors: a [*StaleError] (matching [ErrStale]) when token is lower than the
// highest accepted token, in which case write does not run; [ErrNoToken] for
// the zero token; otherwise whatever write returns. A failed write (non-nil
// error, or a panic, which propagates) does not raise the high-water mark.
// write must not call Do or Check on the same resource: that deadlocks, as
// re-locking a sync.Mutex does.
func (g *Guard) Do(resource string, token Token, write func() error) error {
	if token.IsZero() {
		return ErrNoToken
	}
	e := g.entry(resource)
	se := e.apply(resource, token, write)
	if se == nil {
		return nil
	}
	if s, ok := se.(*StaleError); ok && g.OnStale != nil {
		g.OnStale(s)
	}
	return se
}

// apply holds the resource's lock for the check and the write; the lock is
// released even if write panics (the mark is then not raised).
func (e *entry) apply(resource string, token Token, write func() error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if token < e.high {
		return &StaleError{Resource: resource, Token: token, Highest: e.high}
	}
	if err := write(); err != nil {
		return err
	}
	e.high = token
	return nil
}

// Check is Do without a write: it accepts token (raising the high-water mark)
// or rejects it with a [*StaleError]. Use it when the effect itself happens
// elsewhere but the acceptance must be recorded, e.g. before answering a
// holder's request.
func (g *Guard) Check(resource string, token Token) error {
	return g.Do(resource, token, func() error { return nil })
}

// Highest returns the highest token accepted for resource (zero if none).
func (g *Guard) Highest(resource string) Token {
	e := g.entry(resource)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.high
}
