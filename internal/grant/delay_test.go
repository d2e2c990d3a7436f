package grant

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

func TestCheckDelay(t *testing.T) {
	for _, d := range []time.Duration{0, time.Nanosecond, recipe.MaxLockDelay} {
		if err := CheckDelay("x.WithLockDelay", d); err != nil {
			t.Errorf("CheckDelay(%v): %v", d, err)
		}
	}
	for _, d := range []time.Duration{-time.Nanosecond, recipe.MaxLockDelay + 1} {
		err := CheckDelay("x.WithLockDelay", d)
		if !errors.Is(err, recipe.ErrBadOption) || !strings.Contains(err.Error(), "x.WithLockDelay(") {
			t.Errorf("CheckDelay(%v): %v, want recipe.ErrBadOption naming the option", d, err)
		}
	}
}

// TestRest: the rest is d - elapsed, never below 0 nor above d (a server
// clock set back).
func TestRest(t *testing.T) {
	const d = 10 * time.Second
	for _, c := range []struct{ elapsed, want time.Duration }{
		{0, d}, {3 * time.Second, 7 * time.Second}, {d, 0}, {time.Hour, 0}, {-time.Hour, d},
	} {
		if got := Rest(d, c.elapsed); got != c.want {
			t.Errorf("Rest(%v, %v) = %v, want %v", d, c.elapsed, got, c.want)
		}
	}
}

// TestSight: the first sight of a gone holder starts the delay; another
// sight of it does not restart it; another holder does.
func TestSight(t *testing.T) {
	const d = time.Hour
	var s Sight
	if got := s.Left("a", d); got != d && got < d-time.Second {
		t.Fatalf("first sight: %v left, want %v", got, d)
	}
	time.Sleep(20 * time.Millisecond)
	if got := s.Left("a", d); got > d-20*time.Millisecond {
		t.Errorf("second sight of the same holder: %v left, want the delay running since the first", got)
	}
	if got := s.Left("b", d); got < d-time.Second {
		t.Errorf("another holder: %v left, want a new delay", got)
	}
	if got := s.Left("b", 0); got != 0 {
		t.Errorf("no delay: %v left", got)
	}
}

// TestServing: Wait logs its first wait only, adds what it waited, and an
// ended context returns its cause with the part waited counted; Served is
// at most upTo.
func TestServing(t *testing.T) {
	var buf bytes.Buffer
	rep := &Reporter{Log: slog.New(slog.NewTextHandler(&buf, nil)), Backend: "test", Dir: "jobs"}
	w := NewServing(rep, 100*time.Millisecond)
	if err := w.Wait(context.Background(), 0); err != nil || w.Served() != 0 || buf.Len() != 0 {
		t.Fatalf("a wait of 0: %v, served %v, log %q: want nothing", err, w.Served(), buf.String())
	}
	for range 2 {
		if err := w.Wait(context.Background(), 30*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.Served(); got != 60*time.Millisecond {
		t.Errorf("two waits of 30 ms: served %v, want 60ms", got)
	}
	if n := strings.Count(buf.String(), "serving the lock-delay"); n != 1 || !strings.Contains(buf.String(), "lock=jobs") {
		t.Errorf("log: %q, want one line naming the lock", buf.String())
	}
	cause := errors.New("gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(60*time.Millisecond, func() { cancel(cause) }) // 60 ms more: past the bound
	if err := w.Wait(ctx, time.Hour); err != cause {
		t.Errorf("Wait after its ctx ended: %v, want the cause", err)
	}
	if got := w.Served(); got != 100*time.Millisecond {
		t.Errorf("served %v, want the bound 100ms", got)
	}
}

func TestRefuse(t *testing.T) {
	w := NewServing(&Reporter{Backend: "test", Dir: "/a/b"}, time.Second)
	err := w.Refuse("n-0001", 1500*time.Millisecond)
	if !errors.Is(err, recipe.ErrLocked) || !strings.Contains(err.Error(), "n-0001") || !strings.Contains(err.Error(), "1.5s left") {
		t.Errorf("Refuse: %v, want recipe.ErrLocked naming the gone holder and the rest", err)
	}
	if err := NewServing(nil, 0).Refuse("", time.Second); !errors.Is(err, recipe.ErrLocked) {
		t.Errorf("Refuse without a Reporter: %v", err)
	}
}
