package latch_test

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestHealthTrack: a latch leader's work registered with Health.Track. Its
// node deleted by someone else, the grant ends (the latch re-joins and
// leads again, on a new grant); the work, still running on the old grant,
// turns the Health unhealthy (leader.ErrOverdue) no sooner than the
// tolerance after the old grant ended, and healthy again once it stops.
// Work on the new grant, tracked too, keeps it healthy.
func TestHealthTrack(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s := rtest.Connect(t, cl)
	const tolerance = 300 * time.Millisecond
	h, err := leader.NewHealth(tolerance)
	if err != nil {
		t.Fatal(err)
	}
	a := started(t, s, "a")
	old := awaitLeader(t, a, 10*time.Second)
	stopOld := h.Track(old)
	if err := h.Check(); err != nil {
		t.Fatalf("unhealthy while leading: %v", err)
	}
	node := in.Owned(dir, s.ID())[0]
	if err := in.Conn().Delete(cl.Chroot()+dir+"/"+node, -1); err != nil {
		t.Fatal(err)
	}
	waitDone(t, old.Context(), 5*time.Second, "grant")
	end := time.Now()
	renewed := awaitLeader(t, a, 10*time.Second)
	defer h.Track(renewed)()
	serverkit.Eventually(t, 10*time.Second, "unhealthy", func() bool {
		err := h.Check()
		if err != nil && time.Since(end) < tolerance-50*time.Millisecond {
			t.Fatalf("unhealthy %v after the grant ended, sooner than the tolerance", time.Since(end))
		}
		return errors.Is(err, leader.ErrOverdue)
	})
	stopOld()
	stopOld() // twice: a no-op
	if err := h.Check(); err != nil {
		t.Fatalf("unhealthy once the old work stopped: %v", err)
	}
}
