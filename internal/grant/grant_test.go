package grant

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type ctxKey struct{}

type lostCount struct {
	recipe.Metrics
	n     atomic.Int32
	cause error
}

func (m *lostCount) LeaseLost(kind, dir string, cause error) { m.n.Add(1); m.cause = cause }

// TestEndFirstCauseWins: the first End sets the cause and reports the loss
// once; a later End changes nothing; Release then says ErrLeaseLost with
// the cause, and removes nothing.
func TestEndFirstCauseWins(t *testing.T) {
	m := &lostCount{}
	var c Core
	c.Init(context.WithValue(context.Background(), ctxKey{}, "v"), 7, &Reporter{Metrics: m, Backend: "test", Kind: "lock", Dir: "a"})
	if c.Token() != fence.Token(7) || c.Context().Value(ctxKey{}) != "v" {
		t.Fatal("token or values not kept")
	}
	if !c.End(recipe.ErrSuspended) || c.End(recipe.ErrSessionLost) || c.Live() {
		t.Fatal("End did not report the first end only")
	}
	if !errors.Is(context.Cause(c.Context()), recipe.ErrSuspended) || m.n.Load() != 1 {
		t.Fatalf("cause %v, %d reports", context.Cause(c.Context()), m.n.Load())
	}
	removed := false
	err := c.Release(context.Background(), func() { c.End(recipe.ErrReleased) }, func(context.Context) (bool, error) { removed = true; return true, nil })
	if !errors.Is(err, recipe.ErrLeaseLost) || !errors.Is(err, recipe.ErrSuspended) || removed {
		t.Fatalf("Release after a loss: %v (removed %v)", err, removed)
	}
	if got, want := err.Error(), "recipe: lease lost (connection suspended)"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
}

// TestReleaseIdempotent: a failed removal is tried again by the next
// Release; once done, Release returns nil without removing; a release is
// no loss.
func TestReleaseIdempotent(t *testing.T) {
	m := &lostCount{}
	var c Core
	c.Init(context.Background(), 1, &Reporter{Metrics: m})
	tries := 0
	remove := func(context.Context) (bool, error) {
		tries++
		if tries == 1 {
			return false, errors.New("unconfirmed")
		}
		return true, nil
	}
	end := func() { c.End(recipe.ErrReleased) }
	if err := c.Release(context.Background(), end, remove); err == nil {
		t.Fatal("first removal's error not returned")
	}
	for range 2 {
		if err := c.Release(context.Background(), end, remove); err != nil {
			t.Fatal(err)
		}
	}
	if tries != 2 || m.n.Load() != 0 || context.Cause(c.Context()) != recipe.ErrReleased {
		t.Fatalf("%d removals, %d losses reported, cause %v", tries, m.n.Load(), context.Cause(c.Context()))
	}
}

// TestDeadlineAck: an Ack moves the deadline to its send time + span; an
// older send does not move it back; the deadline expires once when no Ack
// comes; an Ack after that changes nothing.
func TestDeadlineAck(t *testing.T) {
	fired := make(chan struct{}, 2)
	start := time.Now()
	d := NewDeadline(start, 50*time.Millisecond, func() { fired <- struct{}{} })
	d.Ack(start.Add(20 * time.Millisecond))
	d.Ack(start.Add(10 * time.Millisecond))
	if got := d.At(); !got.Equal(start.Add(70 * time.Millisecond)) {
		t.Fatalf("deadline %v after start, want 70ms", got.Sub(start))
	}
	<-fired
	if time.Since(start) < 70*time.Millisecond {
		t.Fatal("expired before the acknowledged deadline")
	}
	d.Ack(time.Now())
	if !d.Check() {
		t.Fatal("Check after expiry says not passed")
	}
	select {
	case <-fired:
		t.Fatal("expired twice")
	case <-time.After(100 * time.Millisecond):
	}
}

// TestDeadlineCheckAndStop: Check expires a passed deadline at once (a late
// timer); Stop keeps expire from running.
func TestDeadlineCheckAndStop(t *testing.T) {
	var n atomic.Int32
	d := NewDeadline(time.Now().Add(-time.Second), time.Millisecond, func() { n.Add(1) })
	d.Check()
	d.Check()
	time.Sleep(20 * time.Millisecond)
	if n.Load() != 1 {
		t.Fatalf("expired %d times", n.Load())
	}
	s := NewDeadline(time.Now(), 10*time.Millisecond, func() { n.Add(1) })
	s.Stop()
	time.Sleep(30 * time.Millisecond)
	if n.Load() != 1 || s.Check() != true {
		t.Fatalf("stopped deadline expired (%d)", n.Load())
	}
}

// TestEndSetsCauseFirst: whoever sees the lease ended (Live false, or an End
// that lost the race) finds the context's cause set.
func TestEndSetsCauseFirst(t *testing.T) {
	for range 200 {
		var c Core
		c.Init(context.Background(), 1, nil)
		start := make(chan struct{})
		done := make(chan error, 2)
		for _, cause := range []error{recipe.ErrSuspended, recipe.ErrReleased} {
			go func() {
				<-start
				c.End(cause)
				done <- context.Cause(c.Context())
			}()
		}
		close(start)
		for c.Live() {
			runtime.Gosched()
		}
		if context.Cause(c.Context()) == nil {
			t.Fatal("Live false before the cause was set")
		}
		for range 2 {
			if err := <-done; err == nil {
				t.Fatal("End returned before the cause was set")
			}
		}
	}
}

type measured struct {
	recipe.Metrics
	started, done int
	err           error
}

func (m *measured) AcquireStarted(kind, dir string) { m.started++ }
func (m *measured) AcquireDone(kind, dir string, took time.Duration, err error) {
	m.done++
	m.err = err
}

// TestBegin: one AcquireStarted and one AcquireDone with the acquisition's
// error; nil Metrics reports nothing and Done is safe.
func TestBegin(t *testing.T) {
	m := &measured{}
	a := Begin(m, "lock", "a")
	if m.started != 1 || m.done != 0 {
		t.Fatalf("after Begin: %+v", m)
	}
	a.Done(nil, recipe.ErrLocked)
	if m.started != 1 || m.done != 1 || m.err != recipe.ErrLocked {
		t.Fatalf("%+v", m)
	}
	Begin(nil, "lock", "a").Done(nil, nil)
}

type holdingMetrics struct {
	measured
	calls []string
}

func (m *holdingMetrics) Holding(kind, dir string, token fence.Token, delta int) {
	m.calls = append(m.calls, fmt.Sprintf("%s %s %v %+d", kind, dir, token, delta))
}

type coreLease struct{ Core }

func (l *coreLease) Release(context.Context) error { l.End(recipe.ErrReleased); return nil }

// TestHolding: a grant is reported to a HoldingMetrics with +1, and with -1
// by the End that ends it, before End returns (also a lease that ended
// before Done, at once); a failed acquisition is not reported.
func TestHolding(t *testing.T) {
	m := &holdingMetrics{}
	l := &coreLease{}
	l.Init(context.Background(), 7, nil)
	Begin(m, "lock", "/a").Done(l, nil)
	Begin(m, "leader", "x").Done(l, nil) // leader.Run's attempt, on the same lease
	if want := []string{"lock /a 7 +1", "leader x 7 +1"}; !slices.Equal(m.calls, want) {
		t.Fatalf("after the grant: %q", m.calls)
	}
	l.End(recipe.ErrSuspended)
	l.End(recipe.ErrReleased)
	if want := []string{"lock /a 7 +1", "leader x 7 +1", "lock /a 7 -1", "leader x 7 -1"}; !slices.Equal(m.calls, want) {
		t.Fatalf("after its end: %q", m.calls)
	}
	m.calls = nil
	gone := &coreLease{}
	gone.Init(context.Background(), 8, nil)
	gone.End(recipe.ErrSessionLost)
	Begin(m, "lock", "/a").Done(gone, nil)
	Begin(m, "lock", "/a").Done(nil, recipe.ErrLocked)
	if want := []string{"lock /a 8 +1", "lock /a 8 -1"}; !slices.Equal(m.calls, want) {
		t.Fatalf("a lease ended before Done, and a failure: %q", m.calls)
	}
}
