package fence

import (
	"errors"
	"fmt"
)

// A Generation numbers one period of a lock's life on one backend: every
// switch of lock service (ZooKeeper to PostgreSQL, say), and every event
// that can make a backend's tokens go back (a restored snapshot, a lost
// Redis counter), starts the next one. Generation g owns the token range
// [g·2^48, (g+1)·2^48): a grant whose backend gave it the raw token r
// carries g.Floor()+r (recipe.InGeneration does it), so the tokens of a
// later generation are larger than every token an earlier one can ever
// produce, whatever the backends, and raising a fence to the new
// generation's Floor refuses every older holder at once
// (docs/backends.md#switching-backends, docs/design.md#switching-backends).
//
// Tokens of a lock that is not wrapped are generation 0 as long as they
// stay below 2^48 (ZooKeeper: while its epoch is below 65536).
type Generation uint16

// GenerationBits is the width of a generation's range of raw tokens.
const GenerationBits = 48

// MaxGeneration is the last generation: its tokens still fit in a signed
// 64-bit integer (PostgreSQL's BIGINT, SQLite's INTEGER, fencesql's limit).
const MaxGeneration Generation = 1<<(63-GenerationBits) - 1

// MaxRawToken is the largest raw token a generation can carry.
const MaxRawToken Token = 1<<GenerationBits - 1

// ErrTokenOverflow is matched by a [*RangeError]: a raw token does not fit
// its generation's range, or the generation is past MaxGeneration.
var ErrTokenOverflow = errors.New("fence: token outside its generation's range")

// RangeError is a raw token, or a generation, out of range; it matches
// [ErrTokenOverflow].
type RangeError struct {
	Generation Generation
	Raw        Token // the backend's token; zero when the generation itself is out of range
}

// Error implements error.
func (e *RangeError) Error() string {
	if e.Generation > MaxGeneration {
		return fmt.Sprintf("fence: generation %d is past the last, %d", e.Generation, MaxGeneration)
	}
	return fmt.Sprintf("fence: the backend's token %s does not fit generation %d (at most %s): switch to a backend whose tokens are smaller",
		e.Raw, e.Generation, MaxRawToken)
}

// Is makes a *RangeError match [ErrTokenOverflow].
func (e *RangeError) Is(target error) bool { return target == ErrTokenOverflow }

// Floor is g's lowest token, g·2^48: every token of an earlier generation is
// below it. Raise the fences to it when switching to g.
func (g Generation) Floor() Token { return Token(g) << GenerationBits }

// Check returns a [*RangeError] if g is past MaxGeneration.
func (g Generation) Check() error {
	if g > MaxGeneration {
		return &RangeError{Generation: g}
	}
	return nil
}

// Token returns raw moved into g's range: g.Floor()+raw. Adding one
// constant keeps the backend's order, so a later grant still carries a
// larger token. Errors: ErrNoToken for the zero raw token; a [*RangeError]
// if raw is over MaxRawToken or g past MaxGeneration.
func (g Generation) Token(raw Token) (Token, error) {
	if err := g.Check(); err != nil {
		return 0, err
	}
	if raw.IsZero() {
		return 0, ErrNoToken
	}
	if raw > MaxRawToken {
		return 0, &RangeError{Generation: g, Raw: raw}
	}
	return g.Floor() + raw, nil
}

// GenerationOf returns the generation whose range holds t (for a token of
// an unwrapped lock, 0 while it is below 2^48).
func GenerationOf(t Token) Generation { return Generation(t >> GenerationBits) }
