// Package secrettest checks that a test's output holds no test password.
// Every password the failure-path tests use starts with Mark, and `make
// test` fails if its whole output holds Mark anywhere (Makefile), so a
// password that leaks shows up even where the leaking test printed nothing.
package secrettest

import (
	"strings"
	"testing"
)

// Mark begins every test password.
const Mark = "s3cr3t-zkr"

// Absent fails the test if text holds Mark or any of parts (pieces of the
// test's passwords that a redaction could leave), naming what without
// printing the text.
func Absent(tb testing.TB, what, text string, parts ...string) {
	tb.Helper()
	for _, s := range append([]string{Mark}, parts...) {
		if strings.Contains(text, s) {
			tb.Errorf("%s shows a password (%q found; text not printed)", what, s)
			return
		}
	}
}
