package memlock

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/leadtest"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
)

// TestMain checks for leaked goroutines. The suites' self-tests wait for
// their child processes, which wait for leases to expire: they run up to 8
// at once (go test -parallel still wins), not GOMAXPROCS (2 here), which
// would queue them behind each other.
func TestMain(m *testing.M) {
	if err := flag.Set("test.parallel", "8"); err != nil {
		panic(err)
	}
	goleak.VerifyTestMain(m)
}

// testTTL is the session time to live of the tests' Servers.
const testTTL = 600 * time.Millisecond

// harness runs the conformance suite against a Server (or a mutant of it).
type harness struct{ srv *Server }

func newHarness(t *testing.T, mut mutation) *harness {
	h := &harness{srv: newServer(testTTL, mut)}
	t.Cleanup(h.srv.Close)
	return h
}

// client is a lock on a Session of its own, with the Session's hooks.
type client struct {
	*Mutex
	*Session
}

func (h *harness) NewClient(tb testing.TB, lock string) locktest.Client {
	s := h.srv.Connect()
	tb.Cleanup(func() { s.Close() })
	m, err := New(s, lock)
	if err != nil {
		tb.Fatal(err)
	}
	return client{m, s}
}

func (h *harness) Leftovers(_ context.Context, lock string) (int, error) {
	return h.srv.Entries(lock), nil
}

// LeaseTime: a crashed client's last keep-alive reached the server at most
// TTL/5 before the crash, so its session expires between 4/5 TTL and TTL
// after it (plus timer latency); Max leaves seconds of slack.
func (h *harness) LeaseTime() locktest.LeaseTime {
	return locktest.LeaseTime{Min: testTTL / 2, Max: testTTL + 3*time.Second}
}

// mutationEnv selects a mutant of the backend in a child process of
// TestSuiteCatchesBrokenBackends.
const mutationEnv = "MEMLOCK_MUTATION"

// TestConformance runs the conformance suite against the backend (or, in a
// child process, against one of its mutants).
func TestConformance(t *testing.T) {
	locktest.Run(t, newHarness(t, mutation(os.Getenv(mutationEnv))))
}

// TestLeaderLoop runs leader.Run's scenario (testkit/leadtest) on the
// backend.
func TestLeaderLoop(t *testing.T) { leadtest.Run(t, newHarness(t, correct)) }

// TestLeaderHealth runs leader.Health's scenario (leadtest.Health).
func TestLeaderHealth(t *testing.T) { leadtest.Health(t, newHarness(t, correct)) }

// TestSuiteCatchesBrokenBackends is the conformance suite's self-test: it
// runs the property each mutant breaks against that mutant, in a child
// process (a failing subtest can't be contained in this one), and checks
// that exactly that property fails.
func TestSuiteCatchesBrokenBackends(t *testing.T) {
	if os.Getenv(mutationEnv) != "" {
		t.Fatalf("%s is set: run TestConformance alone", mutationEnv)
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
			cmd := exec.Command(os.Args[0], "-test.run=^TestConformance$/^"+c.property+"$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), mutationEnv+"="+string(c.mut))
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed against the %s mutant:\n%s", c.mut, out)
			}
			if want := "--- FAIL: TestConformance/" + c.property + " "; !strings.Contains(string(out), want) {
				t.Fatalf("the %s mutant did not fail %s:\n%s", c.mut, c.property, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, ".go:") { // the failures of the suite's files and of ours
					t.Logf("caught: %s", strings.TrimSpace(line))
				}
			}
		})
	}
}

// TestBadInput: every refusal is typed.
func TestBadInput(t *testing.T) {
	if _, err := NewServer(WithTTL(MinTTL - 1)); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("NewServer(WithTTL(%v)) = %v, want recipe.ErrBadOption", MinTTL-1, err)
	}
	srv, err := NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if got := srv.TTL(); got != DefaultTTL {
		t.Errorf("TTL() = %v, want DefaultTTL %v", got, DefaultTTL)
	}
	if _, err := New(nil, "a"); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("New(nil, ...) = %v, want recipe.ErrBadOption", err)
	}
	s := srv.Connect()
	defer s.Close()
	if _, err := New(s, ""); !errors.Is(err, recipe.ErrInvalidPath) {
		t.Errorf(`New(s, "") = %v, want recipe.ErrInvalidPath`, err)
	}
}

// TestNamesAsEveryBackend: New refuses what every backend refuses
// (internal/lockname) and accepts the longest name.
func TestNamesAsEveryBackend(t *testing.T) {
	srv, err := NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	s := srv.Connect()
	defer s.Close()
	for _, name := range []string{"", "a\x00b", "a\xffb", strings.Repeat("x", MaxNameLen+1)} {
		if _, err := New(s, name); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("New(s, %q) = %v, want recipe.ErrInvalidPath", name, err)
		}
	}
	for _, name := range []string{strings.Repeat("x", MaxNameLen), "/a", "a//b", "é"} {
		if _, err := New(s, name); err != nil {
			t.Errorf("New(s, %q) = %v", name, err)
		}
	}
}

// mustNew is New, failing the test on an error.
func mustNew(t *testing.T, s *Session, name string) *Mutex {
	t.Helper()
	m, err := New(s, name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCutOffSession: a cut-off Session's TryAcquire says the Server is
// unreachable; its Release gives up after its context (handing the delete
// to the keep-alive loop, which makes it after Heal); its lease ends with
// recipe.ErrSuspended.
func TestCutOffSession(t *testing.T) {
	srv := newServer(testTTL, correct)
	defer srv.Close()
	s := srv.Connect()
	defer s.Close()
	m := mustNew(t, s, "cut")
	ctx := context.Background()
	l, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.CutOff()
	if _, err := mustNew(t, s, "other").TryAcquire(ctx); !errors.Is(err, ErrUnreachable) {
		t.Errorf("TryAcquire while cut off = %v, want ErrUnreachable", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	var op *recipe.OpError
	if err := l.Release(rctx); !errors.As(err, &op) || !errors.Is(err, ErrUnreachable) {
		t.Errorf("Release while cut off = %v, want a *recipe.OpError matching ErrUnreachable", err)
	}
	if cause := context.Cause(l.Context()); cause != recipe.ErrReleased {
		t.Errorf("lease context cause after Release = %v, want recipe.ErrReleased", cause)
	}
	if n := srv.Entries("cut"); n != 1 {
		t.Errorf("%d entries while the release could not reach the server, want 1", n)
	}
	s.Heal()
	waitEntries(t, srv, "cut", 0, "the keep-alive loop deleted the released entry after Heal")

	l, err = m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.CutOff()
	select {
	case <-l.Context().Done():
	case <-time.After(testTTL + 3*time.Second):
		t.Fatal("a cut-off holder's lease did not end")
	}
	if cause := context.Cause(l.Context()); cause != recipe.ErrSuspended {
		t.Errorf("cause %v, want recipe.ErrSuspended", cause)
	}
	if err := l.Release(ctx); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Release after the loss = %v, want recipe.ErrLeaseLost", err)
	}
	s.Heal()
	waitEntries(t, srv, "cut", 0, "the Session deleted the entry of the lease it gave up")
}

// TestClosedServer: requests to a closed Server fail as unreachable, and a
// lease on it ends.
func TestClosedServer(t *testing.T) {
	srv := newServer(testTTL, correct)
	s := srv.Connect()
	defer s.Close()
	l, err := mustNew(t, s, "a").Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if _, err := mustNew(t, s, "b").TryAcquire(context.Background()); !errors.Is(err, ErrUnreachable) {
		t.Errorf("TryAcquire on a closed server = %v, want ErrUnreachable", err)
	}
	select {
	case <-l.Context().Done():
	case <-time.After(testTTL + 3*time.Second):
		t.Fatal("a lease on a closed server did not end")
	}
}

// TestCrashAndClose: after Crash or Close every call returns
// recipe.ErrSessionClosed and the leases end with it; Close removes the
// entries at once, Crash leaves them to the session's expiry.
func TestCrashAndClose(t *testing.T) {
	srv := newServer(testTTL, correct)
	defer srv.Close()
	ctx := context.Background()
	for _, crash := range []bool{false, true} {
		s := srv.Connect()
		m := mustNew(t, s, "c")
		l, err := m.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if crash {
			s.Crash()
		}
		_ = s.Close()
		if cause := context.Cause(l.Context()); cause != recipe.ErrSessionClosed {
			t.Errorf("crash %v: lease cause %v, want recipe.ErrSessionClosed", crash, cause)
		}
		if _, err := m.Acquire(ctx); !errors.Is(err, recipe.ErrSessionClosed) {
			t.Errorf("crash %v: Acquire after = %v, want recipe.ErrSessionClosed", crash, err)
		}
		if n := srv.Entries("c"); crash != (n == 1) {
			t.Errorf("crash %v: %d entries right after", crash, n)
		}
		waitEntries(t, srv, "c", 0, "the crashed session expired")
	}
}

// waitEntries waits until lock has want entries.
func waitEntries(t *testing.T, srv *Server, lock string, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(testTTL + 3*time.Second)
	for srv.Entries(lock) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d entries, want %d: %s", srv.Entries(lock), want, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHolderConformance: Mutex as a recipe.HolderObserver
// (locktest.RunHolder), observed from a Session of its own.
func TestHolderConformance(t *testing.T) {
	h := newHarness(t, "")
	locktest.RunHolder(t, h, func(tb testing.TB, lock string) recipe.HolderObserver {
		s := h.srv.Connect()
		tb.Cleanup(func() { s.Close() })
		m, err := New(s, lock)
		if err != nil {
			tb.Fatal(err)
		}
		return m
	})
}
