// Package secrettest checks that a test's output holds no test password.
// Every password the failure-path tests use starts with Mark, and `make
// test` fails if its whole output holds Mark anywhere (Makefile), so a
// password that leaks shows up even where the leaking test printed nothing.
package secrettest

import (
	"fmt"
	"slices"
	"testing"
)

// Mark begins every test password.
const Mark = "s3cr3t-zkr"

// Absent fails the test if text holds Mark or any of parts (pieces of the
// test's passwords that a redaction could leave), naming what without
// printing the text.
func Absent(tb testing.TB, what, text string, parts ...string) {
	tb.Helper()
	if s := found(text, parts); s != "" {
		tb.Errorf("%s shows a password (%s found; text not printed)", what, partName(s, parts))
	}
}

// partName says which of Mark and parts was found without printing a part,
// which can be a whole password in some encoding.
func partName(s string, parts []string) string {
	if s == Mark {
		return fmt.Sprintf("%q", Mark)
	}
	return fmt.Sprintf("part %d of %d given", slices.Index(parts, s)+1, len(parts))
}
