package fence

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// Token is a fencing token: a 64-bit number that grows with every grant of
// a lock (on ZooKeeper the winning znode's czxid, from one counter for the
// whole ensemble, so larger also across directories and re-created ones).
// The zero Token means "no token"; it is never a grant's.
type Token uint64

// IsZero reports whether t is the zero ("no token") value.
func (t Token) IsZero() bool { return t == 0 }

// String formats t as a decimal number, the form [ParseToken] reads.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// ErrBadToken is matched by [ParseToken]'s error for text that is not a token.
var ErrBadToken = errors.New("fence: malformed token")

// ParseToken parses the decimal form of [Token.String]. Errors: [ErrBadToken]
// (wrapped) for empty input, signs, non-digits, leading zeros (parsing and
// printing round-trip), values over 64 bits, and "0".
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

// ErrStale is matched by a [*StaleError]: a write's token is lower than one
// the resource accepted, so its holder has lost the lock to a later one.
var ErrStale = errors.New("fence: stale fencing token")

// ErrNoToken is returned when a write carries the zero token.
var ErrNoToken = errors.New("fence: zero fencing token")

// ErrUncertain is matched by the error of a fenced write to a remote
// resource whose answer was lost (a connection broken during the commit):
// it may have been applied. Read the resource to find out; the same token
// is accepted again if nothing newer landed. A [Guard] never returns it.
var ErrUncertain = errors.New("fence: outcome unknown")

// StaleError describes a rejected write; it matches [ErrStale].
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

// Guard is an in-memory fencing check for resources in one process: it keeps
// the highest token accepted per resource name and applies a write only if
// its token is at least that high (an equal token is the current holder
// writing again), atomically with the check. The zero value is ready to
// use; do not copy a Guard after first use. Safe for concurrent use.
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

// Do runs write if token is not lower than the highest accepted for
// resource, and records token as the highest when write returns nil; check,
// write and record are atomic per resource (different resources proceed in
// parallel). Errors: a [*StaleError] when token is lower (write does not
// run); [ErrNoToken] for the zero token; a [*RangeError] (ErrTokenOverflow)
// for a token above MaxToken, which no backend issues and which would
// refuse every later token; otherwise write's error. A failed
// or panicking write (the panic propagates) does not raise the mark; a nil
// write is [Guard.Check]. write must not call Do or Check on the same
// resource: that deadlocks.
func (g *Guard) Do(resource string, token Token, write func() error) error {
	if write == nil {
		write = func() error { return nil }
	}
	if token.IsZero() {
		return ErrNoToken
	}
	if err := CheckToken(token); err != nil {
		return err
	}
	var werr error
	err := g.entry(resource).apply(resource, token, func() error { werr = write(); return werr })
	return Reported(err, werr, g.OnStale)
}

// Reported returns err, a fence's answer, after calling onStale (if not
// nil) with err's *StaleError if it has one that is not werr's: werr is
// what the write the fence ran returned (nil if none ran), whose refusals
// are another fence's to report. It is how every fence of this module
// reports its own refusals to its OnStale field (wired to
// recipe.Metrics.StaleRejected: zkrecipes_fence_rejections_total), and how
// a Fence of your own can.
func Reported(err, werr error, onStale func(*StaleError)) error {
	var se, wse *StaleError
	if onStale != nil && errors.As(err, &se) && !(errors.As(werr, &wse) && wse == se) {
		onStale(se)
	}
	return err
}

// apply runs the check and the write under the resource's lock.
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

// Check is Do without a write: it accepts token (raising the mark) or
// rejects it, e.g. to record acceptance before answering a holder.
func (g *Guard) Check(resource string, token Token) error {
	return g.Do(resource, token, nil)
}

// Highest returns the highest token accepted for resource (zero if none).
func (g *Guard) Highest(resource string) Token {
	e := g.entry(resource)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.high
}
