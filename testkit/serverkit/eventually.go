package serverkit

import (
	"testing"
	"time"
)

// Eventually polls cond every 20 ms until it holds, and fails the test
// naming what when d passes first.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
