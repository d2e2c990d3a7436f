package secrettest

import (
	"errors"
	"fmt"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a testing.TB that counts failures instead of failing.
type recorder struct {
	testing.TB
	failed int
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed++ }
func (r *recorder) Fatalf(string, ...any) { r.failed++ }
func (r *recorder) Error(...any)          { r.failed++ }

// keeps is an error that keeps a secret it never prints, as userinfo.Hide's
// did.
type keeps struct {
	err     error
	secrets []string
}

func (k *keeps) Error() string { return "clean" }
func (k *keeps) Unwrap() error { return k.err }

// TestAbsentErr: a secret in any text, in an unexported field, deep in a
// wrapped error (through Unwrap() error and Unwrap() []error), or as bytes
// is found; a clean chain and nil pass.
func TestAbsentErr(t *testing.T) {
	pw := Mark + "-self"
	clean := errors.New("refused")
	for name, c := range map[string]struct {
		err  error
		fail bool
	}{
		"nil":               {nil, false},
		"clean chain":       {fmt.Errorf("a: %w", errors.Join(clean, &keeps{err: clean})), false},
		"in the text":       {errors.New("pw " + pw), true},
		"in a field":        {&keeps{err: clean, secrets: []string{pw}}, true},
		"wrapped":           {fmt.Errorf("a: %w", &keeps{secrets: []string{"x", pw}}), true},
		"joined":            {errors.Join(clean, &keeps{secrets: []string{pw}}), true},
		"in a wrapped text": {fmt.Errorf("a: %w", errors.New(pw)), true},
	} {
		r := &recorder{TB: t}
		AbsentErr(r, name, c.err)
		if (r.failed > 0) != c.fail {
			t.Errorf("%s: %d failures, want failing %v", name, r.failed, c.fail)
		}
	}
	r := &recorder{TB: t}
	AbsentErr(r, "bytes", &bytesErr{b: []byte(pw)})
	if r.failed == 0 {
		t.Error("a secret kept as bytes was not found")
	}
}

type bytesErr struct{ b []byte }

func (e *bytesErr) Error() string { return "clean" }
