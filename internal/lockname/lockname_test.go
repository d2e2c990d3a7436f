package lockname

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/recipe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errOwn = errors.New("own sentinel")

func TestCheck(t *testing.T) {
	r := Rules{Backend: "testlock", MaxLen: 300, Err: errOwn, Extra: func(n string) string {
		if n == "extra" {
			return "refused by the backend"
		}
		return ""
	}}
	for _, c := range []struct{ name, why string }{
		{"a", ""},
		{"a\nb", ""},
		{"/", ""},
		{"a//b", ""},
		{"é/ü", ""},
		{strings.Repeat("x", 300), ""},
		{"", "empty"},
		{"a\x00b", "contains a NUL byte"},
		{"a\xffb", "not valid UTF-8"},
		{strings.Repeat("x", 301), "301 bytes, longer than testlock.MaxNameLen (300)"},
		{"extra", "refused by the backend"},
	} {
		err := r.Check(c.name)
		if c.why == "" {
			if err != nil {
				t.Errorf("Check(%s) = %v, want nil", Quote(c.name), err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Reason != c.why || e.Name != c.name || e.Backend != "testlock" {
			t.Errorf("Check(%s) = %#v, want an *Error with reason %q", Quote(c.name), err, c.why)
			continue
		}
		if !errors.Is(err, recipe.ErrInvalidPath) || !errors.Is(err, errOwn) {
			t.Errorf("Check(%s) = %v, want it to match recipe.ErrInvalidPath and Rules.Err", Quote(c.name), err)
		}
		if !strings.HasPrefix(err.Error(), "testlock: invalid lock name ") {
			t.Errorf("Check(%s): message %q, want it to name the backend and a lock name", Quote(c.name), err)
		}
	}
}

func TestQuoteShortensLongNames(t *testing.T) {
	if got := Quote("a\nb"); got != `"a\nb"` {
		t.Errorf("Quote = %s", got)
	}
	if got := Quote(strings.Repeat("x", 200)); got != `"`+strings.Repeat("x", 200)+`"` {
		t.Errorf("Quote of 200 bytes shortened: %s", got)
	}
	long := strings.Repeat("y", 10<<20)
	want := `"` + strings.Repeat("y", 64) + `"… (10485760 bytes)`
	if got := Quote(long); got != want {
		t.Errorf("Quote of 10 MiB = %.100s, want %s", got, want)
	}
	if n := len((&Error{Backend: "b", Name: long, Reason: "r"}).Error()); n > 200 {
		t.Errorf("the error of a 10 MiB name is %d bytes long", n)
	}
}
