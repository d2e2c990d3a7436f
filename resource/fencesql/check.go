package fencesql

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/zkrecipes/zkrecipes/fence"
)

// checkToken refuses the zero token (fence.ErrNoToken) and one the
// databases' signed BIGINT cannot hold, above fence.MaxToken: ErrTokenRange
// wrapping the *fence.RangeError (fence.ErrTokenOverflow) that every fence
// gives it.
func checkToken(token fence.Token) error {
	if token.IsZero() {
		return fence.ErrNoToken
	}
	if err := fence.CheckToken(token); err != nil {
		return fmt.Errorf("%w: %w", ErrTokenRange, err)
	}
	return nil
}

// checkFloor refuses, before any statement, what checkToken refuses and a
// floor above fence.MaxFloor (fence.CheckFloor): no era reaches it.
func checkFloor(floor fence.Token) error {
	if err := checkToken(floor); err != nil {
		return err
	}
	return fence.CheckFloor(floor)
}

// checkResource refuses a resource name the fence table cannot hold
// (ErrBadResource).
func checkResource(r string) error {
	switch {
	case r == "":
		return fmt.Errorf("%w: empty", ErrBadResource)
	case len(r) > MaxResourceLen:
		return fmt.Errorf("%w: %d bytes, longer than %d: %.40q…", ErrBadResource, len(r), MaxResourceLen, r)
	case !utf8.ValidString(r):
		return fmt.Errorf("%w: not valid UTF-8: %q", ErrBadResource, r)
	case strings.IndexByte(r, 0) >= 0:
		return fmt.Errorf("%w: contains a NUL byte: %q", ErrBadResource, r)
	}
	return nil
}

// checkName accepts a plain identifier, optionally schema-qualified: the
// names this package writes into its statements.
func checkName(what, name string) error {
	parts := strings.Split(name, ".")
	ok := len(parts) <= 2
	for _, p := range parts {
		ok = ok && identifier(p)
	}
	if !ok {
		return fmt.Errorf("%w: %s %q (letters, digits and _, at most 63 bytes, not starting with a digit; one schema qualifier allowed)", ErrBadName, what, name)
	}
	return nil
}

// identifier reports whether s is a plain identifier: letters, digits and
// _, at most 63 bytes, not starting with a digit.
func identifier(s string) bool {
	if s == "" || len(s) > 63 || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
