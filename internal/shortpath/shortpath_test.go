package shortpath

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOf(t *testing.T) {
	if got := Of("/locks/a"); got != "/locks/a" {
		t.Fatalf("short path changed: %q", got)
	}
	long := "/" + strings.Repeat("x", 300)
	if got, want := Of(long), long[:64]+"… (301 bytes)"; got != want {
		t.Fatalf("Of(long) = %q, want %q", got, want)
	}
	if p := "/" + strings.Repeat("y", 199); Of(p) != p {
		t.Fatal("a 200-byte path was shortened")
	}
}
