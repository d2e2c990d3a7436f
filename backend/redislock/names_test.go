package redislock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/internal/lockname"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// TestCheckName: the lock-name rules of every backend (internal/lockname)
// with this package's MaxNameLen, and nothing else: slashes, control
// characters and spaces are names like any other.
func TestCheckName(t *testing.T) {
	for _, c := range []struct {
		name string
		why  string // "" if accepted, else the reason given
	}{
		{"a", ""},
		{"/jobs/nightly", ""},
		{"é/ü", ""},
		{"a b", ""},
		{"a\nb", ""},
		{"/", ""},
		{"a//b", ""},
		{"a/", ""},
		{"_lock_x", ""},
		{"a:token", ""},
		{strings.Repeat("x", redislock.MaxNameLen), ""},
		{strings.Repeat("é", redislock.MaxNameLen/2), ""},
		{"", "empty"},
		{"a\x00b", "contains a NUL byte"},
		{"a\xffb", "not valid UTF-8"},
		{strings.Repeat("x", redislock.MaxNameLen+1), "1025 bytes, longer than redislock.MaxNameLen (1024)"},
		{strings.Repeat("x", 10<<20), "10485760 bytes, longer than redislock.MaxNameLen (1024)"},
	} {
		err := redislock.CheckName(c.name)
		if c.why == "" {
			if err != nil {
				t.Errorf("CheckName(%s) = %v, want nil", lockname.Quote(c.name), err)
			}
			continue
		}
		var ne *redislock.NameError
		if !errors.As(err, &ne) || ne.Name != c.name || ne.Reason != c.why {
			t.Errorf("CheckName(%s) = %v, want a *NameError: %s", lockname.Quote(c.name), err, c.why)
			continue
		}
		if !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("CheckName(%s) = %v, want it to match recipe.ErrInvalidPath", lockname.Quote(c.name), err)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "redislock: invalid lock name ") || len(msg) > 400 {
			t.Errorf("CheckName(%s): message %.500q, want one naming a lock name, at most 400 bytes", lockname.Quote(c.name), msg)
		}
	}
}
