// Package locknametest checks a backend's CheckName against the lock-name
// rules of package lockname, so that every backend's test states only its
// limit and its own extra cases.
package locknametest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/lockname"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Case is a name and what CheckName must say of it: Why is "" if the name
// is accepted, else the reason given (the whole reason, or its beginning
// when Prefix is set).
type Case struct {
	Name   string
	Why    string
	Prefix bool
}

// Shared returns the cases every backend answers alike, for a length limit
// of max bytes named limit in the reason (e.g. "pglock.MaxNameLen").
func Shared(max int, limit string) []Case {
	tooLong := func(n int) string { return fmt.Sprintf("%d bytes, longer than %s (%d)", n, limit, max) }
	return []Case{
		{Name: "a"},
		{Name: "é/ü"},
		{Name: "a\nb"}, // control characters and empty elements are names like any other
		{Name: "/"},
		{Name: "a//b"},
		{Name: "a/"},
		{Name: strings.Repeat("x", max)},
		{Name: "", Why: "empty"},
		{Name: "a\x00b", Why: "contains a NUL byte"},
		{Name: "a\xffb", Why: "not valid UTF-8"},
		{Name: strings.Repeat("x", max+1), Why: tooLong(max + 1)},
		{Name: strings.Repeat("x", 10<<20), Why: tooLong(10 << 20)},
	}
}

// Run checks check (a backend's CheckName) on cases: an accepted name gives
// nil; a refused one a *lockname.Error with that Name and reason, matching
// recipe.ErrInvalidPath and every sentinel in also, whose message starts
// with prefix (e.g. "pglock: invalid lock name ") and is at most 400 bytes.
func Run(t *testing.T, prefix string, check func(string) error, cases []Case, also ...error) {
	t.Helper()
	for _, c := range cases {
		q := lockname.Quote(c.Name)
		err := check(c.Name)
		if c.Why == "" {
			if err != nil {
				t.Errorf("CheckName(%s) = %v, want nil", q, err)
			}
			continue
		}
		var ne *lockname.Error
		if !errors.As(err, &ne) || ne.Name != c.Name ||
			(c.Prefix && !strings.HasPrefix(ne.Reason, c.Why)) || (!c.Prefix && ne.Reason != c.Why) {
			t.Errorf("CheckName(%s) = %v, want a *NameError: %s", q, err, c.Why)
			continue
		}
		for _, s := range append([]error{recipe.ErrInvalidPath}, also...) {
			if !errors.Is(err, s) {
				t.Errorf("CheckName(%s) = %v, want it to match %v", q, err, s)
			}
		}
		if msg := err.Error(); !strings.HasPrefix(msg, prefix) || len(msg) > 400 {
			t.Errorf("CheckName(%s): message %.500q, want one naming a lock name, at most 400 bytes", q, msg)
		}
	}
}
