package election_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestRunHealth: Run with WithHealth. A leader whose node is deleted by
// someone else loses its leadership; its function, which ignores its
// context, turns the Health unhealthy (leader.ErrOverdue) no sooner than
// the tolerance after that, and healthy again once it returns.
func TestRunHealth(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	const dir, tolerance = "/elect/health", 300 * time.Millisecond
	h, err := leader.NewHealth(tolerance)
	if err != nil {
		t.Fatal(err)
	}
	e := newElection(t, rtest.Connect(t, cl), dir, election.WithHealth(h))
	ctx, stop := context.WithCancel(context.Background())
	var ended, terms atomic.Int64
	led, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- election.Run(ctx, e, []byte("me"), func(fctx context.Context, _ fence.Token) error {
			if terms.Add(1) > 1 { // Run campaigns again after the first term
				<-fctx.Done()
				return nil
			}
			context.AfterFunc(fctx, func() { ended.Store(time.Now().UnixNano()) })
			close(led)
			<-release // ignores fctx
			return nil
		})
	}()
	<-led
	if err := h.Check(); err != nil {
		t.Fatalf("unhealthy while leading: %v", err)
	}
	for _, n := range in.Children(dir) {
		in.Delete(dir + "/" + n)
	}
	serverkit.Eventually(t, 10*time.Second, "the leadership ends", func() bool { return ended.Load() != 0 })
	end := time.Unix(0, ended.Load())
	serverkit.Eventually(t, 10*time.Second, "unhealthy", func() bool {
		err := h.Check()
		if err != nil && time.Since(end) < tolerance-20*time.Millisecond { // this test's AfterFunc may run after the Health's
			t.Fatalf("unhealthy %v after the leadership ended, sooner than the tolerance", time.Since(end))
		}
		return errors.Is(err, leader.ErrOverdue)
	})
	close(release)
	serverkit.Eventually(t, 10*time.Second, "healthy once the function returned", func() bool { return h.Check() == nil })
	stop()
	<-done
}
