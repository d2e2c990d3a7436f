package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestLockEra: --era N hands the command a token in era N's range (the
// switch of docs/backends.md without the shell arithmetic), a refusal
// under --era still names the holder, and an era past fence.MaxEra is a
// usage error.
func TestLockEra(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	gate, out := filepath.Join(dir, "gate"), filepath.Join(dir, "token")
	holder := start(t, cl, dir, "lock", "--era", "3", "/era/job", "--", "sh", "-c",
		// Written whole, then renamed: awaitFile must not see the file the
		// shell's > creates empty before echo writes.
		fmt.Sprintf(`echo "$ZKRECIPES_TOKEN" > %s.tmp && mv %s.tmp %s; %s`, out, out, out, gateScript(gate)))
	holder.awaitLog("lock acquired")
	awaitFile(t, out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("ZKRECIPES_TOKEN %q: %v", b, err)
	}
	if g := fence.EraOf(fence.Token(n)); g != 3 {
		t.Errorf("ZKRECIPES_TOKEN %d is in era %d, want 3", n, g)
	}

	refused := start(t, cl, dir, "lock", "--era", "3", "--wait", "0", "/era/job", "--", "true")
	refused.expect(exitHeld, 30*time.Second)
	if r := refused.logged("held elsewhere"); r == nil || r["holder"] == nil {
		t.Errorf("the refusal under --era does not name the holder: %v\n%s", r, refused.stderr)
	}
	touch(t, gate)
	holder.expect(0, 30*time.Second)

	bad := start(t, cl, dir, "lock", "--era", strconv.Itoa(int(fence.MaxEra)+1), "/era/job", "--", "true")
	bad.expect(exitUsage, 30*time.Second)
	if !strings.Contains(bad.stderr.String(), "--era") {
		t.Errorf("the usage error does not name --era:\n%s", bad.stderr)
	}
}

// TestDecimalFlags: --era and --semaphore take decimal digits only. Go's
// flag package read "010" as octal 8 and "0x10" as 16, so that two users
// of one lock writing the same-looking number could give two eras or two
// semaphore sizes: each such form is now a usage error naming the flag.
func TestDecimalFlags(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	for _, c := range [][]string{
		{"lock", "--era", "010", "/decimal/job", "--", "true"},
		{"lock", "--era", "0x10", "/decimal/job", "--", "true"},
		{"lock", "--era", "0b1", "/decimal/job", "--", "true"},
		{"lock", "--era", "1_0", "/decimal/job", "--", "true"},
		{"lock", "--era", "+3", "/decimal/job", "--", "true"},
		{"lock", "--semaphore", "010", "/decimal/sem", "--", "true"},
		{"lock", "--semaphore", "0x2", "/decimal/sem", "--", "true"},
		{"lock", "--semaphore", "-1", "/decimal/sem", "--", "true"},
		{"inspect", "--semaphore", "0o3", "/decimal/sem"},
	} {
		p := start(t, cl, dir, c...)
		p.expect(exitUsage, 30*time.Second)
		if s := p.stderr.String(); !strings.Contains(s, c[1][1:]) || !strings.Contains(s, "decimal digits") {
			t.Errorf("zkrecipes %q: the usage error does not name %s and say decimal digits:\n%s", c, c[1], s)
		}
	}
	// Decimal still works, zero included (the range check names it).
	start(t, cl, dir, "lock", "--era", "10", "--semaphore", "2", "/decimal/ok", "--", "true").expect(0, 30*time.Second)
	start(t, cl, dir, "lock", "--era", "0", "/decimal/ok", "--", "true").expect(0, 30*time.Second)
}

// TestParseDecimalMessages: a leading zero is refused with a message built
// from the number given (it once quoted "010" whatever was written).
func TestParseDecimalMessages(t *testing.T) {
	for in, want := range map[string]string{
		"00":   "write 0",
		"012":  `"012" is ambiguous: 10 to readers of octal; write 12`,
		"0999": "write 999",
	} {
		if _, err := parseDecimal(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseDecimal(%q) = %v, want an error with %q", in, err, want)
		}
	}
	if n, err := parseDecimal("10"); n != 10 || err != nil {
		t.Errorf("parseDecimal(10) = %d, %v", n, err)
	}
}
