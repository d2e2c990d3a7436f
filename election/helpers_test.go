package election_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/zookeeper"

	"github.com/cenkalti/backoff/v4"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// quietLogger discards Run's log lines, so test output stays readable; logs
// that a test checks go through a capture instead.
var quietLogger = slog.New(slog.DiscardHandler)

// fastBackOff keeps Run's waits between campaigns short in tests.
func fastBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 10 * time.Millisecond
	b.MaxInterval = 200 * time.Millisecond
	b.MaxElapsedTime = 0
	return b
}

// newElection builds an Election or fails the test.
func newElection(t testing.TB, s *zookeeper.Session, p string, opts ...election.Option) *election.Election {
	t.Helper()
	opts = append([]election.Option{election.WithLogger(quietLogger), election.WithBackOff(fastBackOff)}, opts...)
	e, err := election.New(s, p, opts...)
	if err != nil {
		t.Fatalf("election.New(%q): %v", p, err)
	}
	return e
}

// campaign runs Campaign or fails the test.
func campaign(t testing.TB, e *election.Election, value string) recipe.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := e.Campaign(ctx, []byte(value))
	if err != nil {
		t.Fatalf("Campaign(%q): %v", value, err)
	}
	return l
}

// resign runs Resign or fails the test.
func resign(t testing.TB, e *election.Election) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
}

// campaignAsync starts Campaign in a goroutine; the result arrives on the
// channel.
func campaignAsync(ctx context.Context, e *election.Election, value string) <-chan rtest.Result {
	return rtest.Async(ctx, func(ctx context.Context) (recipe.Lease, error) { return e.Campaign(ctx, []byte(value)) })
}

// next reads one observation, failing the test after d.
func next(t testing.TB, ch <-chan election.Observation, d time.Duration) election.Observation {
	t.Helper()
	select {
	case o, ok := <-ch:
		if !ok {
			t.Fatal("observation channel closed")
		}
		return o
	case <-time.After(d):
		t.Fatalf("no observation within %v", d)
		return election.Observation{}
	}
}

// nothingWithin fails the test if an observation arrives within d.
func nothingWithin(t testing.TB, ch <-chan election.Observation, d time.Duration) {
	t.Helper()
	select {
	case o, ok := <-ch:
		t.Fatalf("unexpected observation %v (open %v)", o, ok)
	case <-time.After(d):
	}
}

// runner is one election.Run participant started by a test.
type runner struct {
	cancel context.CancelCauseFunc
	done   chan error
}

func startRun(e *election.Election, value string, fn func(context.Context, fence.Token) error) *runner {
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &runner{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- election.Run(ctx, e, []byte(value), fn) }()
	return r
}

// stop cancels the runner and returns Run's error, failing the test if Run
// does not return within d.
func (r *runner) stop(t testing.TB, d time.Duration) error {
	t.Helper()
	r.cancel(nil)
	select {
	case err := <-r.done:
		return err
	case <-time.After(d):
		t.Fatalf("Run did not return within %v of its context's end", d)
		return nil
	}
}

// logCapture is a slog handler that keeps messages.
type logCapture struct {
	mu   sync.Mutex
	msgs []string
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	c.mu.Lock()
	c.msgs = append(c.msgs, b.String())
	c.mu.Unlock()
	return nil
}
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCapture) WithGroup(string) slog.Handler      { return c }

func (c *logCapture) contains(s string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.msgs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
