// Package metricstest holds the recipe.Metrics of the tests: Events, which
// records every call as a line of text for a test to compare with the lines
// it expects. It imports no backend, so that the tests of every backend,
// including packages zookeeper's and memlock's own, can use it without an
// import cycle (testkit/rtest imports zookeeper).
package metricstest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/metricreason"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Events is a recipe.Metrics and a leader.LeadingMetrics that records each
// call as one line of text, in this format:
//
//	started <kind> <dir>               AcquireStarted
//	done <kind> <dir> <err>            AcquireDone
//	waiting <kind> <dir> <+1|-1>       Waiting
//	lost <kind> <dir> <err>            LeaseLost (the cause)
//	state <from> <to> <err>            SessionState (the cause)
//	stale <resource> <token><<highest> StaleRejected
//	leading <name> <+1|-1>             Leading
//
// <err> is "nil", or the error's label as every metrics adapter gives it
// (internal/metricreason: prommetrics.Reason, otelmetrics's attribute; "locked",
// "suspended", "session_closed", ...), followed by " (<its message>)" when
// Messages is set. A "done" line whose duration is not positive ends with
// " took=<duration>", so that no expected line matches it.
//
// The zero Events is ready for use; set Messages and call Forbid before the
// first event. Its methods are safe for concurrent use and never block.
type Events struct {
	// Messages writes each error's message after its label.
	Messages bool

	mu        sync.Mutex
	lines     []string        // since the last Take
	took      []time.Duration // of every "done"
	changed   chan struct{}   // closed at the next line, if a WaitFor waits
	forbidden []string
	t         testing.TB
}

var _ recipe.Metrics = (*Events)(nil)

// Forbid makes every later call of the given events ("state", "stale", ...:
// the first word of its line) fail t at once, for a test of a backend that
// never makes them. The line is recorded all the same.
func (e *Events) Forbid(t testing.TB, events ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.t, e.forbidden = t, events
}

// AcquireStarted implements recipe.Metrics.
func (e *Events) AcquireStarted(kind, dir string) { e.add("started", kind, dir) }

// AcquireDone implements recipe.Metrics.
func (e *Events) AcquireDone(kind, dir string, took time.Duration, err error) {
	e.mu.Lock()
	e.took = append(e.took, took)
	e.mu.Unlock()
	if took <= 0 {
		e.add("done", kind, dir, e.label(err), fmt.Sprintf("took=%v", took))
		return
	}
	e.add("done", kind, dir, e.label(err))
}

// Waiting implements recipe.Metrics.
func (e *Events) Waiting(kind, dir string, delta int) {
	e.add("waiting", kind, dir, fmt.Sprintf("%+d", delta))
}

// LeaseLost implements recipe.Metrics.
func (e *Events) LeaseLost(kind, dir string, cause error) { e.add("lost", kind, dir, e.label(cause)) }

// SessionState implements recipe.Metrics.
func (e *Events) SessionState(from, to recipe.ConnState, cause error) {
	e.add("state", from.String(), to.String(), e.label(cause))
}

// StaleRejected implements recipe.Metrics.
func (e *Events) StaleRejected(s *fence.StaleError) {
	e.add("stale", s.Resource, fmt.Sprintf("%v<%v", s.Token, s.Highest))
}

// Leading implements leader.LeadingMetrics.
func (e *Events) Leading(name string, delta int) { e.add("leading", name, fmt.Sprintf("%+d", delta)) }

// label writes err as the format says.
func (e *Events) label(err error) string {
	switch {
	case err == nil:
		return "nil"
	case e.Messages:
		return metricreason.Of(err) + " (" + err.Error() + ")"
	}
	return metricreason.Of(err)
}

func (e *Events) add(fields ...string) {
	line := strings.Join(fields, " ")
	e.mu.Lock()
	e.lines = append(e.lines, line)
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
	t, forbidden := e.t, slices.Contains(e.forbidden, fields[0])
	e.mu.Unlock()
	if forbidden {
		t.Errorf("metrics: %q: a call this backend never makes", line)
	}
}

// Lines returns the lines recorded since the last Take, in the order of
// the calls.
func (e *Events) Lines() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.lines)
}

// Take returns the lines recorded since the last Take and forgets them.
func (e *Events) Take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.lines
	e.lines = nil
	return l
}

// Count returns how many of the lines since the last Take equal line.
func (e *Events) Count(line string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, l := range e.lines {
		if l == line {
			n++
		}
	}
	return n
}

// Took returns the duration of every AcquireDone so far (Take keeps them).
func (e *Events) Took() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.took)
}

// WaitFor waits until a line since the last Take equals line, and fails
// the test (FailNow) if none does within d. Call it from the test's
// goroutine.
func (e *Events) WaitFor(t testing.TB, d time.Duration, line string) {
	t.Helper()
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		e.mu.Lock()
		found := slices.Contains(e.lines, line)
		if e.changed == nil {
			e.changed = make(chan struct{})
		}
		changed := e.changed
		e.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("metrics: no %q within %v; since the last Take:\n\t%s", line, d, strings.Join(e.Lines(), "\n\t"))
		}
	}
}

// Expect takes the lines since the last Take and reports whether they are
// want, in this order; if not, it fails the test (Errorf) naming step.
func (e *Events) Expect(t testing.TB, step string, want ...string) bool {
	t.Helper()
	return expect(t, step, e.Take(), want)
}

// ExpectAnyOrder is Expect for events of several goroutines: the lines
// since the last Take must be want in any order.
func (e *Events) ExpectAnyOrder(t testing.TB, step string, want ...string) bool {
	t.Helper()
	got, want := e.Take(), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	return expect(t, step+" (in any order)", got, want)
}

func expect(t testing.TB, step string, got, want []string) bool {
	t.Helper()
	if slices.Equal(got, want) {
		return true
	}
	t.Errorf("%s: metrics events\n\t%s\nwant\n\t%s", step, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	return false
}
