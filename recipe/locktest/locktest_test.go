package locktest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe/locktest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memTTL is the in-memory backend's session time to live.
const memTTL = 600 * time.Millisecond

// memHarness runs the suite against the in-memory lease-based lock.
type memHarness struct{ srv *memServer }

func newMemHarness(t *testing.T, mut mutation) *memHarness {
	h := &memHarness{srv: newMemServer(memTTL, mut)}
	t.Cleanup(h.srv.close)
	return h
}

func (h *memHarness) NewClient(tb testing.TB, lock string) locktest.Client {
	c := newMemClient(h.srv, lock)
	tb.Cleanup(c.close)
	return c
}

func (h *memHarness) Leftovers(_ context.Context, lock string) (int, error) {
	return h.srv.count(lock), nil
}

// LeaseTime: a crashed client's last keep-alive reached the server at most
// ttl/5 before the crash, so its session expires between 4/5 ttl and ttl
// after it (plus timer latency); Max leaves seconds of slack.
func (h *memHarness) LeaseTime() locktest.LeaseTime {
	return locktest.LeaseTime{Min: memTTL / 2, Max: memTTL + 3*time.Second}
}

// mutationEnv selects a mutant of the backend in a child process of
// TestSuiteCatchesBrokenBackends.
const mutationEnv = "LOCKTEST_MUTATION"

// TestMemoryBackend runs the conformance suite against the in-memory backend
// (or, in a child process, against one of its mutants).
func TestMemoryBackend(t *testing.T) {
	locktest.Run(t, newMemHarness(t, mutation(os.Getenv(mutationEnv))))
}

// TestSuiteCatchesBrokenBackends runs the property each mutant breaks against
// that mutant, in a child process (a failing subtest can't be contained in
// this one), and checks that exactly that property fails.
func TestSuiteCatchesBrokenBackends(t *testing.T) {
	if os.Getenv(mutationEnv) != "" {
		t.Fatalf("%s is set: run TestMemoryBackend alone", mutationEnv)
	}
	cases := []struct {
		mut      mutation
		property string
	}{
		{sameToken, "Basics"},
		{tryIgnoresHolder, "MutualExclusion"},
		{instantExpiry, "CrashedHolderFreed"},
		{neverExpire, "CrashedHolderFreed"},
		{sameToken, "FencingRejectsStaleWriter"},
		{releaseAnyHolder, "StaleReleaseKeepsNewHolder"},
		{noWatchdog, "OwnershipLossCancelsContext"},
		{leakCancelled, "CancellationLeavesNothing"},
		{ignoresContext, "CancellationLeavesNothing"},
		{noWatchdog, "LeaderFailover"},
	}
	for _, c := range cases {
		t.Run(string(c.mut)+"/"+c.property, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryBackend$/^"+c.property+"$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), mutationEnv+"="+string(c.mut))
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed against the %s mutant:\n%s", c.mut, out)
			}
			if want := "--- FAIL: TestMemoryBackend/" + c.property + " "; !strings.Contains(string(out), want) {
				t.Fatalf("the %s mutant did not fail %s:\n%s", c.mut, c.property, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "_test.go:") || strings.Contains(line, "properties.go:") {
					t.Logf("caught: %s", strings.TrimSpace(line))
				}
			}
		})
	}
}
