package latch_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/latch"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func TestMain(m *testing.M) { zktest.Main(m) }

const dir = "/election/job"

// newLatch builds a Latch (closed at cleanup, before its session) or fails
// the test.
func newLatch(t testing.TB, s *zookeeper.Session, id string, opts ...latch.Option) *latch.Latch {
	t.Helper()
	l, err := latch.New(s, dir, id, opts...)
	if err != nil {
		t.Fatalf("latch.New(%q): %v", id, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.Close(ctx); err != nil {
			t.Errorf("Close of %s at cleanup: %v", id, err)
		}
	})
	return l
}

// started is newLatch and Start.
func started(t testing.TB, s *zookeeper.Session, id string) *latch.Latch {
	t.Helper()
	l := newLatch(t, s, id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Start(ctx); err != nil {
		t.Fatalf("Start of %s: %v", id, err)
	}
	return l
}

// awaitLeader waits up to d for l to lead.
func awaitLeader(t testing.TB, l *latch.Latch, d time.Duration) recipe.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	lease, err := l.Await(ctx)
	if err != nil {
		t.Fatalf("%s did not become leader within %v: %v", l.ID(), d, err)
	}
	return lease
}

// notLeaderFor checks that l does not become leader within d.
func notLeaderFor(t testing.TB, l *latch.Latch, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if lease, err := l.Await(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s: Await = %v, %v; want no leadership within %v", l.ID(), lease, err, d)
	}
}

func closeLatch(t testing.TB, l *latch.Latch) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close of %s: %v", l.ID(), err)
	}
}

// recorder reads a Listen channel into a slice.
type recorder struct {
	mu      sync.Mutex
	changes []latch.Change
	closed  bool
	done    chan struct{}
}

// record listens to l until the channel is closed (or the test ends).
func record(t testing.TB, l *latch.Latch) *recorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{done: make(chan struct{})}
	ch := l.Listen(ctx)
	go func() {
		defer close(r.done)
		for c := range ch {
			r.mu.Lock()
			r.changes = append(r.changes, c)
			r.mu.Unlock()
		}
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

func (r *recorder) Get() []latch.Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.changes)
}

// waitClosed waits until the channel was closed and returns what it got.
func (r *recorder) waitClosed(t testing.TB, d time.Duration) []latch.Change {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(d):
		t.Fatalf("listener channel not closed within %v; got %v", d, r.Get())
	}
	return r.Get()
}

// leaderSeq renders changes as "L" (leader) and "-" (not leader).
func leaderSeq(cs []latch.Change) string {
	var b strings.Builder
	for _, c := range cs {
		if c.Leader {
			b.WriteByte('L')
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// nodesOf returns the participants carrying id.
func nodesOf(t testing.TB, l *latch.Latch, id string) []zookeeper.Participant {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ps, err := l.Participants(ctx)
	if err != nil {
		t.Fatalf("Participants: %v", err)
	}
	var out []zookeeper.Participant
	for _, p := range ps {
		if string(p.Data) == id {
			out = append(out, p)
		}
	}
	return out
}

// participants lists the election.
func participants(t testing.TB, l *latch.Latch) []zookeeper.Participant {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ps, err := l.Participants(ctx)
	if err != nil {
		t.Fatalf("Participants: %v", err)
	}
	return ps
}

// newProxy returns a FaultProxy closed at cleanup, after the latches and
// sessions that use it (register it before them).
func newProxy(t testing.TB) *serverkit.FaultProxy {
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	return p
}

// waitDone waits up to d for ctx to end and returns its cause.
func waitDone(t testing.TB, ctx context.Context, d time.Duration, what string) error {
	t.Helper()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(d):
		t.Fatalf("%s: context not done within %v", what, d)
		return nil
	}
}

// pauseAt is a slog handler that counts the records with message msg, and
// holds the first one (the goroutine logging it) until release is closed,
// closing met when it arrives.
type pauseAt struct {
	msg          string
	met, release chan struct{}
	mu           sync.Mutex
	n            int
}

func newPauseAt(msg string) *pauseAt {
	return &pauseAt{msg: msg, met: make(chan struct{}), release: make(chan struct{})}
}

func (p *pauseAt) Enabled(context.Context, slog.Level) bool { return true }
func (p *pauseAt) Handle(_ context.Context, r slog.Record) error {
	if r.Message != p.msg {
		return nil
	}
	p.mu.Lock()
	p.n++
	first := p.n == 1
	p.mu.Unlock()
	if first {
		close(p.met)
		<-p.release
	}
	return nil
}
func (p *pauseAt) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *pauseAt) WithGroup(string) slog.Handler      { return p }

func (p *pauseAt) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}
