package lazy

import (
	"go.uber.org/goleak"

	"errors"
	"testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type closer struct{ closed int }

func (c *closer) Close() error { c.closed++; return nil }

// TestSharedLaunchOnceStopRelaunch: one launch for many Loads; Stop closes
// it once (after before) and a later Load launches anew.
func TestSharedLaunchOnceStopRelaunch(t *testing.T) {
	var s Shared[*closer]
	launches := 0
	launch := func() (*closer, error) { launches++; return &closer{}, nil }
	a := s.Get(t, "x", launch)
	if b, _ := s.Load(launch); b != a || launches != 1 {
		t.Fatalf("second Load: same=%v launches=%d", b == a, launches)
	}
	var saw *closer
	if err := s.Stop(func(c *closer) { saw = c }); err != nil || saw != a || a.closed != 1 {
		t.Fatalf("Stop: err=%v before saw it=%v closed=%d", err, saw == a, a.closed)
	}
	if err := s.Stop(nil); err != nil || a.closed != 1 {
		t.Fatalf("second Stop: err=%v closed=%d", err, a.closed)
	}
	if c := s.Get(t, "x", launch); c == a || launches != 2 {
		t.Fatalf("Load after Stop: new=%v launches=%d", c != a, launches)
	}
}

// TestSharedErrorSticks: a failed launch is not retried until Stop, and
// Stop closes nothing for it.
func TestSharedErrorSticks(t *testing.T) {
	var s Shared[*closer]
	boom := errors.New("boom")
	launches := 0
	launch := func() (*closer, error) { launches++; return nil, boom }
	for range 2 {
		if _, err := s.Load(launch); !errors.Is(err, boom) {
			t.Fatalf("Load: %v", err)
		}
	}
	if launches != 1 {
		t.Fatalf("launches = %d, want 1", launches)
	}
	if err := s.Stop(func(*closer) { t.Error("before ran for a failed launch") }); err != nil {
		t.Fatal(err)
	}
	if _, _ = s.Load(launch); launches != 2 {
		t.Fatalf("after Stop: launches = %d, want 2", launches)
	}
}
