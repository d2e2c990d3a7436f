package election_test

import (
	"context"
	"errors"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// connect opens a Session for the test and closes it at cleanup.
func connect(t testing.TB, cl *zktest.Cluster, opts ...recipe.Option) *recipe.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := recipe.Connect(ctx, cl.Servers(), opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

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
func newElection(t testing.TB, s *recipe.Session, p string, opts ...election.Option) *election.Election {
	t.Helper()
	opts = append([]election.Option{election.WithLogger(quietLogger), election.WithBackOff(fastBackOff)}, opts...)
	e, err := election.New(s, p, opts...)
	if err != nil {
		t.Fatalf("election.New(%q): %v", p, err)
	}
	return e
}

// inspector is a raw go-zookeeper connection (no recipes) used to look at and
// tamper with the tree. Paths given to its methods are relative to the
// cluster's chroot.
type inspector struct {
	t      testing.TB
	conn   *zk.Conn
	chroot string
}

func inspect(t testing.TB, cl *zktest.Cluster) *inspector {
	t.Helper()
	conn, _, err := zk.Connect(cl.Addrs(), 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return &inspector{t: t, conn: conn, chroot: cl.Chroot()}
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

func (in *inspector) children(p string) []string {
	in.t.Helper()
	c, _, err := in.conn.Children(in.chroot + p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		in.t.Fatalf("children %s: %v", p, err)
	}
	slices.Sort(c)
	return c
}

// owned lists the children of dir whose ephemeral owner is the session.
func (in *inspector) owned(dir string, session int64) []string {
	in.t.Helper()
	var out []string
	for _, c := range in.children(dir) {
		ok, st, err := in.conn.Exists(in.chroot + path.Join(dir, c))
		if err != nil {
			in.t.Fatal(err)
		}
		if ok && st.EphemeralOwner == session {
			out = append(out, c)
		}
	}
	return out
}

func (in *inspector) create(p string) {
	in.t.Helper()
	cur := in.chroot
	for _, part := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		cur += "/" + part
		if _, err := in.conn.Create(cur, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			in.t.Fatalf("create %s: %v", cur, err)
		}
	}
}

// deleteAll deletes dir and every child in one transaction (an operator's
// deleteall, or a restore from a snapshot taken before the election
// existed), retrying when a child appeared meanwhile. It returns the number
// of children deleted.
func (in *inspector) deleteAll(dir string) int {
	in.t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		kids := in.children(dir)
		var ops []any
		for _, c := range kids {
			ops = append(ops, &zk.DeleteRequest{Path: in.chroot + dir + "/" + c, Version: -1})
		}
		ops = append(ops, &zk.DeleteRequest{Path: in.chroot + dir, Version: -1})
		_, err := in.conn.Multi(ops...)
		if err == nil {
			return len(kids)
		}
		if !errors.Is(err, zk.ErrNotEmpty) && !errors.Is(err, zk.ErrNoNode) {
			in.t.Fatalf("deleteall %s: %v", dir, err)
		}
	}
	in.t.Fatalf("deleteall %s: children kept appearing", dir)
	return 0
}

// eventually polls cond every 20 ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
func campaignAsync(ctx context.Context, e *election.Election, value string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := e.Campaign(ctx, []byte(value))
		ch <- result{l, err, time.Now()}
	}()
	return ch
}

type result struct {
	lease recipe.Lease
	err   error
	at    time.Time
}

func await(t testing.TB, ch <-chan result, d time.Duration) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("Campaign did not return within %v", d)
		return result{}
	}
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
