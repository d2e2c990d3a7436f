package zktest

import (
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"
)

// TestInspectorChrootRoot: on a Shared view (a chroot), "/" is the chroot
// itself for the Inspector's reads, and Inspect returns with its session
// established.
func TestInspectorChrootRoot(t *testing.T) {
	cl := Shared(t)
	in := Inspect(t, cl)
	if st := in.conn.State(); st != zk.StateHasSession {
		t.Fatalf("Inspect returned in state %v, want %v", st, zk.StateHasSession)
	}
	in.Create("/a", nil)
	in.Create("/b/c", nil)
	if got := in.Children("/"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf(`Children("/") = %v, want [a b]`, got)
	}
	if in.Stat("/") == nil {
		t.Error(`Stat("/") = nil: the chroot exists`)
	}
	if n := in.DeleteAll("/b"); n != 1 || in.Stat("/b") != nil {
		t.Errorf(`DeleteAll("/b") = %d, and /b is there: %v`, n, in.Stat("/b") != nil)
	}
}
