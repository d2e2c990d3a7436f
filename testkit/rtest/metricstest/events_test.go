package metricstest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// TestFormat: each method's line, as the doc of Events gives it.
func TestFormat(t *testing.T) {
	e := &Events{}
	e.AcquireStarted("lock", "/a")
	e.AcquireDone("lock", "/a", time.Millisecond, nil)
	e.AcquireDone("lock", "/a", time.Millisecond, fmt.Errorf("x: %w", recipe.ErrLocked))
	e.AcquireDone("lock", "/a", 0, nil)
	e.Waiting("lock", "/a", 1)
	e.Waiting("lock", "/a", -1)
	e.LeaseLost("lock", "/a", recipe.ErrSuspended)
	e.SessionState(0, recipe.StateConnected, nil)
	e.StaleRejected(&fence.StaleError{Resource: "db", Token: 3, Highest: 5})
	e.Leading("job", 1)
	e.Expect(t, "without messages", "started lock /a", "done lock /a nil", "done lock /a locked",
		"done lock /a nil took=0s", "waiting lock /a +1", "waiting lock /a -1", "lost lock /a suspended",
		"state UNKNOWN CONNECTED nil", "stale db 3<5", "leading job +1")
	if d := e.Took(); !slices.Equal(d, []time.Duration{time.Millisecond, time.Millisecond, 0}) {
		t.Errorf("Took() = %v", d)
	}

	e.Messages = true
	e.LeaseLost("lock", "/a", fmt.Errorf("%w: why", recipe.ErrSessionLost))
	e.AcquireDone("lock", "/a", time.Second, nil)
	e.ExpectAnyOrder(t, "with messages", "done lock /a nil", "lost lock /a session_lost (recipe: session lost: why)")
	if l := e.Lines(); l != nil {
		t.Errorf("lines after Take: %q", l)
	}
}

// failures is a testing.TB that keeps its Errorf calls.
type failures struct {
	testing.TB
	errs []string
}

func (f *failures) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// TestForbidAndWaitFor: a forbidden event fails the test at once and is
// recorded; WaitFor returns at a line another goroutine records.
func TestForbidAndWaitFor(t *testing.T) {
	e := &Events{}
	f := &failures{TB: t}
	e.Forbid(f, "state", "stale")
	e.AcquireStarted("lock", "a")
	e.SessionState(recipe.StateConnected, recipe.StateLost, recipe.ErrSessionClosed)
	if len(f.errs) != 1 || e.Count("state CONNECTED LOST session_closed") != 1 || e.Count("started lock a") != 1 {
		t.Errorf("failures %q, lines %q", f.errs, e.Lines())
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(10 * time.Millisecond)
		e.Waiting("lock", "a", 1)
	}()
	e.WaitFor(t, 10*time.Second, "waiting lock a +1")
	<-done
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
