package leadtest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
)

// healthTolerance is the tolerance Health's checks run with.
const healthTolerance = 500 * time.Millisecond

// clockSlack allows for the test's own record of the lease's end being a
// little later than the Health's (two AfterFuncs, in either order).
const clockSlack = 20 * time.Millisecond

// Health runs leader.Run with a leader.Health on a client of h whose
// leader function ignores its context (a leader that does not stop), cuts
// the client off, and checks: healthy while it leads; its lease (fn's
// context) ends within LeaseTime.Max of the cut; the Health turns
// unhealthy (leader.ErrOverdue, HTTP 503) no sooner than its tolerance
// after that, and within the tolerance plus a poll's slack; and healthy
// again once the function returns. A leader whose function returns when
// its context ends stays healthy through the same cut.
func Health(t *testing.T, h locktest.Harness) {
	lt := h.LeaseTime()
	for _, stuck := range []bool{true, false} {
		c := h.NewClient(t, map[bool]string{true: "health-stuck", false: "health-prompt"}[stuck])
		hl, err := leader.NewHealth(healthTolerance)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(hl)
		ctx, stop := context.WithCancel(context.Background())
		var ended, terms atomic.Int64 // ended: unix nanos when the first fn's context ended
		led, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			done <- leader.Run(ctx, c, func(fctx context.Context, _ fence.Token) error {
				if terms.Add(1) > 1 { // a later term (Run campaigns again): not checked
					<-fctx.Done()
					return nil
				}
				context.AfterFunc(fctx, func() { ended.Store(time.Now().UnixNano()) })
				close(led)
				if stuck {
					<-release // ignores fctx
				} else {
					<-fctx.Done()
				}
				return nil
			}, leader.WithHealth(hl), leader.WithLogger(slog.New(slog.DiscardHandler)),
				leader.WithOnReturn(leader.Stop()))
		}()
		select {
		case <-led:
		case <-time.After(locktest.OpTimeout):
			t.Fatalf("no leadership within %v", locktest.OpTimeout)
		}
		if err := hl.Check(); err != nil {
			t.Fatalf("unhealthy while leading: %v", err)
		}
		c.CutOff()
		cut := time.Now()
		for ended.Load() == 0 {
			if time.Since(cut) > lt.Max {
				t.Fatalf("the cut-off leader's lease did not end within LeaseTime.Max %v", lt.Max)
			}
			if err := hl.Check(); err != nil {
				t.Fatalf("unhealthy before the lease ended: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		end := time.Unix(0, ended.Load())
		waitHealth(t, hl, srv.URL, stuck, end)
		close(release)
		for deadline := time.Now().Add(locktest.OpTimeout); hl.Check() != nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("still unhealthy %v after the function returned", locktest.OpTimeout)
			}
		}
		stop()
		c.Heal()
		select {
		case <-done:
		case <-time.After(locktest.OpTimeout):
			t.Fatal("leader.Run did not return after its context ended")
		}
		srv.Close()
	}
}

// waitHealth polls hl after the lease ended at end: with stuck, it must
// turn unhealthy, not before the tolerance and within it plus slack, and
// say so over HTTP; otherwise it must stay healthy until fn returned and
// a little longer.
func waitHealth(t *testing.T, hl *leader.Health, url string, stuck bool, end time.Time) {
	t.Helper()
	const slack = 2 * time.Second // polls and a loaded machine
	for {
		err := hl.Check()
		since := time.Since(end)
		switch {
		case err != nil && !stuck:
			t.Fatalf("a leader whose function returns was reported unhealthy: %v", err)
		case err != nil && !errors.Is(err, leader.ErrOverdue):
			t.Fatalf("Check = %v, want leader.ErrOverdue", err)
		case err != nil && since < healthTolerance-clockSlack:
			t.Fatalf("unhealthy %v after the lease ended, sooner than the tolerance %v", since, healthTolerance)
		case err != nil:
			resp, herr := http.Get(url)
			if herr != nil {
				t.Fatal(herr)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("the probe answered %d, want 503", resp.StatusCode)
			}
			return
		case stuck && since > healthTolerance+slack:
			t.Fatalf("still healthy %v after the lease ended (tolerance %v)", since, healthTolerance)
		case !stuck && since > 2*healthTolerance:
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
