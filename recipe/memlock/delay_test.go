package memlock

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/recipe/locktest"
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
func TestLockDelay(t *testing.T) {
	t.Parallel()
	locktest.RunLockDelay(t, newHarness(t, correct), 4*time.Second)
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
