package pglock

import (
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit/locknametest"
)

// TestCheckName: the lock-name rules of every backend (internal/lockname)
// with this package's MaxNameLen, and nothing else: slashes, control
// characters and spaces are names like any other.
func TestCheckName(t *testing.T) {
	cases := append(locknametest.Shared(MaxNameLen, "pglock.MaxNameLen"), []locknametest.Case{
		{Name: "/jobs/nightly"},
		{Name: "a b"},
		{Name: "_lock_x"},
		{Name: "a:token"},
		{Name: strings.Repeat("é", MaxNameLen/2)},
	}...)
	locknametest.Run(t, "pglock: invalid lock name ", CheckName, cases)
}
