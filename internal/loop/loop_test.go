package loop

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// countingBackOff counts the waits it is asked for and its resets.
type countingBackOff struct{ next, resets int }

func (b *countingBackOff) NextBackOff() time.Duration { b.next++; return time.Millisecond }
func (b *countingBackOff) Reset()                     { b.resets++ }

var errPermanent = errors.New("permanent")

// TestRunFollowsNext: Wait waits without a reset, Rest resets and waits,
// Now resets without a wait; the error that Ends accepts is returned, and
// Retrying hears every other error.
func TestRunFollowsNext(t *testing.T) {
	b := &countingBackOff{}
	var retried []error
	errAgain := errors.New("again")
	steps := []struct {
		next Next
		err  error
	}{{Wait, errAgain}, {Rest, nil}, {Now, nil}, {Now, errAgain}, {Wait, errPermanent}}
	i := 0
	l := Loop{
		BackOff:  b,
		Max:      time.Second,
		Ends:     func(err error) bool { return errors.Is(err, errPermanent) },
		Retrying: func(err error) { retried = append(retried, err) },
	}
	err := l.Run(context.Background(), func(context.Context) (Next, error) {
		s := steps[i]
		i++
		return s.next, s.err
	})
	if !errors.Is(err, errPermanent) || i != len(steps) {
		t.Fatalf("Run = %v after %d attempts, want %v after %d", err, i, errPermanent, len(steps))
	}
	if b.next != 2 || b.resets != 3 {
		t.Errorf("%d waits and %d resets, want 2 waits (Wait, Rest) and 3 resets (Rest, Now, Now)", b.next, b.resets)
	}
	if len(retried) != 2 {
		t.Errorf("Retrying heard %v, want the two errors that did not end the loop", retried)
	}
}

// TestRunReturnsCtxCause: an attempt cut short by ctx's end, and a wait,
// both end Run with ctx's cause, whatever the attempt returned.
func TestRunReturnsCtxCause(t *testing.T) {
	stopped := errors.New("stopped")
	for _, next := range []Next{Wait, Now} {
		ctx, cancel := context.WithCancelCause(context.Background())
		l := Loop{BackOff: &countingBackOff{}, Ends: func(error) bool { return true }}
		err := l.Run(ctx, func(context.Context) (Next, error) {
			cancel(stopped)
			return next, errPermanent
		})
		if !errors.Is(err, stopped) {
			t.Errorf("Run = %v, want the cause %v", err, stopped)
		}
	}
}

// TestPauseStop: a policy that says backoff.Stop waits max.
func TestPauseStop(t *testing.T) {
	start := time.Now()
	if err := Pause(context.Background(), &backoff.StopBackOff{}, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("Pause waited %v, want max (20ms)", d)
	}
}

// TestStopperConfirms: a permanent error ends the loop at once, but one
// matching Confirm only when the next attempt meets it too; a success or
// another error in between starts the count again; a transient error never
// ends it.
func TestStopperConfirms(t *testing.T) {
	errMixed, errHard, errSoft := errors.New("mixed"), errors.New("hard"), errors.New("soft")
	permanent := func(err error) bool { return errors.Is(err, errMixed) || errors.Is(err, errHard) }
	s := Stopper{Confirm: errMixed}
	for i, c := range []struct {
		err  error
		ends bool
	}{
		{errSoft, false},
		{errMixed, false},
		{nil, false},
		{errMixed, false},
		{errSoft, false},
		{errMixed, false},
		{errors.Join(errMixed, errSoft), true},
		{errHard, true},
	} {
		if got := s.Stop(c.err, permanent(c.err)); got != c.ends {
			t.Errorf("attempt %d (%v): Stop = %v, want %v", i, c.err, got, c.ends)
		}
	}
	var zero Stopper
	if !zero.Stop(errMixed, true) {
		t.Error("a Stopper without Confirm did not end on a permanent error")
	}
}
