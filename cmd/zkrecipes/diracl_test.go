package main

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestAuthUntrustedDir (issue 23): a client without credentials made the
// lock's directory first, open to all, so that it could delete the
// holder's node: on the old code `lock --auth-file` took the lock in it.
// Now lock and elect refuse it (70, a message saying what to do, nothing
// left behind, no password shown); a directory made by zkrecipes with the
// same credentials is taken.
func TestAuthUntrustedDir(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create("/pre/x", zk.WorldACL(zk.PermAll))
	dir := t.TempDir()
	file := authFile(t, dir)
	for _, args := range [][]string{
		{"lock", "--auth-file", file, "--wait", "0", "/pre/x", "--", "true"},
		{"lock", "--auth-file", file, "/pre/x", "--", "true"},
		{"elect", "--auth-file", file, "--once", "/pre/x", "--", "true"},
	} {
		p := start(t, cl, dir, args...)
		p.expect(exitSoftware, 30*time.Second)
		if p.logged(untrustedDirMsg) == nil || strings.Contains(p.stderr.String(), authSecret) {
			t.Errorf("zkrecipes %q: no clear message, or the password shown:\n%s", args[:1], p.stderr)
		}
		if got := in.Children("/pre/x"); len(got) != 0 {
			t.Fatalf("zkrecipes %q left %q", args[:1], got)
		}
	}
	in.Create("/pre/ok", nil) // zkrecipes makes /pre/ok/x with the creator ACL
	start(t, cl, dir, "lock", "--auth-file", file, "/pre/ok/x", "--", "true").expect(0, 30*time.Second)
	start(t, cl, dir, "lock", "--auth-file", file, "/pre/ok/x", "--", "true").expect(0, 30*time.Second)
}
