package memlock

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
)

// NewDelayedClient makes the harness a locktest.DelayHarness.
func (h *harness) NewDelayedClient(tb testing.TB, lock string, d time.Duration) locktest.Client {
	s := h.srv.Connect()
	tb.Cleanup(func() { s.Close() })
	m, err := New(s, lock, WithLockDelay(d))
	if err != nil {
		tb.Fatal(err)
	}
	return client{m, s}
}

// TestLockDelay runs the shared lock-delay properties; the delay must
// exceed the harness's LeaseTime.Max - Min (3.3 s).
// (In a child process of TestDelaySuiteCatchesBrokenBackends, against one
// of the backend's mutants.)
func TestLockDelay(t *testing.T) {
	t.Parallel()
	locktest.RunLockDelay(t, newHarness(t, mutation(os.Getenv(mutationEnv))), 4*time.Second)
}

// TestDelaySuiteCatchesBrokenBackends is RunLockDelay's self-test, as
// TestSuiteCatchesBrokenBackends is Run's: against each mutant, the
// properties it breaks fail, and exactly those (the others pass).
func TestDelaySuiteCatchesBrokenBackends(t *testing.T) {
	if os.Getenv(mutationEnv) != "" {
		t.Fatalf("%s is set: run TestLockDelay alone", mutationEnv)
	}
	properties := []string{"CleanReleaseServesNone", "CrashServesDelay", "CutOffServesDelay", "AbandonKeepsDelay"}
	for _, c := range []struct {
		mut    mutation
		breaks []string
	}{
		// No delay at all: the waiter that should give up during it is
		// granted first.
		{everyEndClean, []string{"CrashServesDelay", "CutOffServesDelay", "AbandonKeepsDelay"}},
		{abandonEndsDelay, []string{"AbandonKeepsDelay"}},
	} {
		t.Run(string(c.mut), func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestLockDelay$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), mutationEnv+"="+string(c.mut))
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed against the %s mutant:\n%s", c.mut, out)
			}
			for _, p := range properties {
				want := "--- PASS: TestLockDelay/" + p + " "
				if slices.Contains(c.breaks, p) {
					want = "--- FAIL: TestLockDelay/" + p + " "
				}
				if !strings.Contains(string(out), want) {
					t.Errorf("against the %s mutant, want %q:\n%s", c.mut, strings.TrimSpace(want), out)
				}
			}
		})
	}
}

func TestLockDelayOption(t *testing.T) {
	srv := newServer(testTTL, correct)
	defer srv.Close()
	s := srv.Connect()
	defer s.Close()
	for _, d := range []time.Duration{-time.Second, recipe.MaxLockDelay + 1} {
		if _, err := New(s, "x", WithLockDelay(d)); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("WithLockDelay(%v): %v, want recipe.ErrBadOption", d, err)
		}
	}
	if _, err := New(s, "x", WithLockDelay(recipe.MaxLockDelay), nil); err != nil {
		t.Errorf("WithLockDelay(MaxLockDelay) and a nil option: %v", err)
	}
}

// TestLockDelayLostLeaseCleanedUp: a holder cut off long enough to lose
// its lease, but healed before the Server expires its session, deletes its
// entry itself: an unclean end all the same (it did not Release), so the
// waiter serves the delay.
func TestLockDelayLostLeaseCleanedUp(t *testing.T) {
	t.Parallel()
	const d = 300 * time.Millisecond
	h := newHarness(t, correct)
	a, b := h.NewDelayedClient(t, "lost", d), h.NewDelayedClient(t, "lost", d)
	ctx := context.Background()
	la, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan recipe.Lease, 1)
	go func() {
		l, err := b.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	a.CutOff()
	<-la.Context().Done() // TTL/2 without an answer: the lease is lost
	lost := time.Now()
	a.Heal() // before the Server's TTL: A's keep-alive deletes the entry
	lb := <-got
	if lb == nil {
		return
	}
	if after := time.Since(lost); after < d {
		t.Errorf("B granted %v after A lost its lease, sooner than the delay %v", after, d)
	}
	if served := recipe.LockDelayServed(lb); served <= 0 {
		t.Errorf("LockDelayServed = %v after a lost lease's cleanup, want the delay", served)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
