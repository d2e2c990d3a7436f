package fence

import (
	"errors"
	"fmt"
)

// An Era numbers one period of a lock's life on one backend: every
// switch of lock service, and every event that can make a backend's
// tokens go back (a restored snapshot, a lost Redis counter), starts the
// next one. Era g owns the token range [g·2^48, (g+1)·2^48): a grant
// whose backend gave it the raw token r carries g.Floor()+r
// (recipe.InEra), so a later era's tokens are larger than every token of
// an earlier one, and raising a fence to the new era's Floor refuses every
// older holder at once (see Eras in the package documentation).
type Era uint16

// EraBits is the width of an era's range of raw tokens.
const EraBits = 48

// MaxEra is the last era: its tokens still fit in a signed
// 64-bit integer (PostgreSQL's BIGINT, SQLite's INTEGER, fencesql's limit).
const MaxEra Era = 1<<(63-EraBits) - 1

// MaxRawToken is the largest raw token an era can carry.
const MaxRawToken Token = 1<<EraBits - 1

// MaxToken is the largest token any fence accepts, written or as a floor:
// 2^63-1, the last era's last token, the largest a signed 64-bit integer
// (a BIGINT) holds. No backend issues a larger one (ZooKeeper's zxids,
// etcd's revisions and the PostgreSQL and Redis counters are signed 64-bit
// numbers), and a floor above it would lock a resource against every token
// for ever. [CheckToken] refuses what is above it.
const MaxToken Token = Token(MaxEra)<<EraBits | MaxRawToken

// MaxFloor is the largest floor any fence accepts: the last era's Floor,
// MaxEra.Floor() = 32767·2^48. A floor above it is reached by no era's
// Floor: it would refuse every grant of every era but the last one's
// largest tokens, and, at MaxToken, every real grant, with no era left to
// switch to. [CheckFloor] refuses it.
const MaxFloor Token = Token(MaxEra) << EraBits

// ErrTokenOverflow is matched by a [*RangeError]: a raw token does not fit
// its era's range, the era is past MaxEra, a token is above MaxToken or a
// floor above MaxFloor.
var ErrTokenOverflow = errors.New("fence: token outside its era's range")

// RangeError is a raw token, an era or a whole token out of range; it
// matches [ErrTokenOverflow].
type RangeError struct {
	Era   Era
	Raw   Token // the backend's token; zero when the era itself is out of range
	Token Token // a whole token (a write's or a floor) above MaxToken; zero otherwise
	Floor Token // a floor above MaxFloor (and at most MaxToken); zero otherwise
}

// Error implements error.
func (e *RangeError) Error() string {
	if e.Token > MaxToken {
		return fmt.Sprintf("fence: token %s is past the last era's range (at most %s = 2^63-1)", e.Token, MaxToken)
	}
	if e.Floor > MaxFloor {
		return fmt.Sprintf("fence: floor %s is above the last era's floor %s: no era starts at or above it, so it would refuse the grants of every era",
			e.Floor, MaxFloor)
	}
	if e.Era > MaxEra {
		return fmt.Sprintf("fence: era %d is past the last, %d", e.Era, MaxEra)
	}
	return fmt.Sprintf("fence: the backend's token %s does not fit era %d (at most %s): switch to a backend whose tokens are smaller",
		e.Raw, e.Era, MaxRawToken)
}

// Is makes a *RangeError match [ErrTokenOverflow].
func (e *RangeError) Is(target error) bool { return target == ErrTokenOverflow }

// Floor is g's lowest token, g·2^48: every token of an earlier era is
// below it. Raise the fences to it when switching to g.
func (g Era) Floor() Token { return Token(g) << EraBits }

// CheckToken returns a [*RangeError] (matching [ErrTokenOverflow]) if t is
// above MaxToken: every fence refuses such a token, written or as a floor,
// before it looks at the resource.
func CheckToken(t Token) error {
	if t > MaxToken {
		return &RangeError{Era: EraOf(t), Token: t}
	}
	return nil
}

// CheckFloor returns a [*RangeError] (matching [ErrTokenOverflow]) if
// floor is above MaxFloor (with Token set above MaxToken, else Floor):
// every fence's RaiseFloor refuses such a floor before it looks at the
// resource, as no era's grants would all pass it.
func CheckFloor(floor Token) error {
	if err := CheckToken(floor); err != nil {
		return err
	}
	if floor > MaxFloor {
		return &RangeError{Era: EraOf(floor), Floor: floor}
	}
	return nil
}

// Check returns a [*RangeError] if g is past MaxEra.
func (g Era) Check() error {
	if g > MaxEra {
		return &RangeError{Era: g}
	}
	return nil
}

// Token returns raw moved into g's range: g.Floor()+raw. Adding one
// constant keeps the backend's order, so a later grant still carries a
// larger token. Errors: ErrNoToken for the zero raw token; a [*RangeError]
// if raw is over MaxRawToken or g past MaxEra.
func (g Era) Token(raw Token) (Token, error) {
	if err := g.Check(); err != nil {
		return 0, err
	}
	if raw.IsZero() {
		return 0, ErrNoToken
	}
	if raw > MaxRawToken {
		return 0, &RangeError{Era: g, Raw: raw}
	}
	return g.Floor() + raw, nil
}

// EraOf returns the era whose range holds t (for a token of
// an unwrapped lock, 0 while it is below 2^48).
func EraOf(t Token) Era { return Era(t >> EraBits) }
