package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"

	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestReservedLockNames replays issue 23's finding 4 with the CLI: holding
// the lock "P/_c_<32 zeros>-lock-0000000000" made `lock --wait 0 P` exit
// 75 (held), and the "-read-" form made `lock P` and `elect --once P` exit
// 64 (another recipe's nodes). Such a name is now a usage error (64, the
// message naming the rule) before anything is created, and P stays free.
func TestReservedLockNames(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	dir := t.TempDir()
	const p = "/locks/P"
	for i, kind := range []string{"lock-", "read-"} {
		bad := p + "/_c_00000000000000000000000000000000-" + kind + "0000000000"
		gate, ran := filepath.Join(dir, fmt.Sprint("gate", i)), filepath.Join(dir, fmt.Sprint("ran", i))
		holder := start(t, cl, dir, "lock", bad, "--", "sh", "-c", "touch "+ran+"; "+gateScript(gate))
		// The old code took the lock and ran the command; wait for either.
		serverkit.Eventually(t, 20*time.Second, "the holder refused or running", func() bool {
			select {
			case <-holder.done:
				return true
			default:
				return holder.logged("lock acquired") != nil
			}
		})
		for _, args := range [][]string{
			{"lock", "--wait", "0", p, "--", "true"},
			{"elect", "--once", p, "--id", "x", "--", "true"},
		} {
			start(t, cl, dir, args...).expect(0, 30*time.Second)
		}
		touch(t, gate)
		holder.expect(exitUsage, 30*time.Second)
		if msg := holder.stderr.String(); !strings.Contains(msg, "named like a queue node of kind \""+kind+"\"") {
			t.Errorf("zkrecipes lock %s: the message does not name the rule:\n%s", bad, msg)
		}
		if _, err := os.Stat(ran); in.Stat(bad) != nil || err == nil {
			t.Errorf("zkrecipes lock %s created its directory or ran its command", bad)
		}
	}
	for _, args := range [][]string{
		{"elect", "/e/_c_0123456789abcdef0123456789abcdef-elect-0000000001", "--", "true"},
		{"inspect", "/i/_c_0123456789abcdef0123456789abcdef-latch-0000000001/x"},
	} {
		q := start(t, cl, dir, args...)
		q.expect(exitUsage, 30*time.Second)
		if !strings.Contains(q.stderr.String(), "which the recipes reserve") {
			t.Errorf("zkrecipes %q: the message does not name the rule:\n%s", args, q.stderr)
		}
	}
}
