// Package connerrtest checks the rows of docs/backends.md's "Errors at
// connect" table in each backend's tests: what a failed Connect (or first
// acquisition) must match, say, and how soon.
package connerrtest

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Case is one row: what the error must match (Perm: recipe.ErrNoPermission,
// Unreach: recipe.ErrUnreachable, Cert: a *tls.CertificateVerificationError
// for errors.As, Bad: recipe.ErrBadOption), what its text must say, and how
// soon it must come (0: no bound).
type Case struct {
	Name                     string
	Run                      func(t *testing.T) error
	Perm, Unreach, Cert, Bad bool
	Says                     string
	// Prefix, if not "", is how the text must start (RefusedWords).
	Prefix string
	Within time.Duration
}

// RefusedWords start the text of every backend's refusal of the client's
// credentials at connect (issue 37 item 9: one wording everywhere).
const RefusedWords = "recipe: connect: refused by the server's access control: "

// Check runs c and checks its error.
func Check(t *testing.T, c Case) {
	t.Helper()
	start := time.Now()
	err := c.Run(t)
	took := time.Since(start)
	var ve *tls.CertificateVerificationError
	got := [4]bool{errors.Is(err, recipe.ErrNoPermission), errors.Is(err, recipe.ErrUnreachable), errors.As(err, &ve), errors.Is(err, recipe.ErrBadOption)}
	if want := [4]bool{c.Perm, c.Unreach, c.Cert, c.Bad}; err == nil || got != want {
		t.Errorf("%s: [ErrNoPermission ErrUnreachable *CertificateVerificationError ErrBadOption] = %v, want %v; err %v", c.Name, got, want, err)
	}
	if err != nil && !strings.Contains(err.Error(), c.Says) {
		t.Errorf("%s: the error does not say %q: %v", c.Name, c.Says, err)
	}
	if err != nil && !strings.HasPrefix(err.Error(), c.Prefix) {
		t.Errorf("%s: the error does not start with %q: %v", c.Name, c.Prefix, err)
	}
	if c.Within > 0 && took > c.Within {
		t.Errorf("%s: took %v, want at most %v: %v", c.Name, took, c.Within, err)
	}
	t.Logf("%s (%v): %v", c.Name, took.Round(time.Millisecond), err)
}
