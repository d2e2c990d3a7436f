package zookeeper

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

func connect(t testing.TB, servers []string, opts ...Option) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Connect(ctx, servers, opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// next reads the next state change or fails.
func next(t *testing.T, ch <-chan StateChange, d time.Duration) StateChange {
	t.Helper()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatal("listener closed")
		}
		return c
	case <-time.After(d):
		t.Fatalf("no state change within %v", d)
	}
	return StateChange{}
}

// TestSuspendedThenReconnected: a cut gives SUSPENDED, the reconnection to
// the same session RECONNECTED with the same ID; Done stays open.
func TestSuspendedThenReconnected(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	s := connect(t, cl.Servers(), WithDialer(p.Dial), WithSessionTimeout(4*time.Second))
	if s.State() != recipe.StateConnected || s.ID() == 0 {
		t.Fatalf("state %v id %x", s.State(), s.ID())
	}
	if s.SessionTimeout() != 4*time.Second {
		t.Fatalf("negotiated timeout %v", s.SessionTimeout())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.Listen(ctx)
	id, done := s.ID(), s.Done()
	p.Cut()
	if c := next(t, ch, 5*time.Second); c.State != recipe.StateSuspended || c.SessionID != id || !errors.Is(c.Cause, recipe.ErrSuspended) {
		t.Fatalf("got %+v, want SUSPENDED", c)
	}
	p.Resume()
	if c := next(t, ch, 10*time.Second); c.State != recipe.StateReconnected || c.SessionID != id {
		t.Fatalf("got %+v, want RECONNECTED same session", c)
	}
	select {
	case <-done:
		t.Fatal("Done closed although the session survived")
	default:
	}
}

// TestExpiryGivesLostThenNewSession: a partition past the session timeout
// gives LOST (Done closed), then RECONNECTED with a new session ID.
func TestExpiryGivesLostThenNewSession(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	s := connect(t, cl.Servers(), WithDialer(p.Dial), WithSessionTimeout(time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.Listen(ctx)
	id, done := s.ID(), s.Done()
	p.Blackhole()
	if c := next(t, ch, 5*time.Second); c.State != recipe.StateSuspended {
		t.Fatalf("got %+v, want SUSPENDED", c)
	}
	c := next(t, ch, 5*time.Second)
	if c.State != recipe.StateLost || c.SessionID != id || !errors.Is(c.Cause, recipe.ErrSessionLost) {
		t.Fatalf("got %+v, want LOST", c)
	}
	select {
	case <-done:
	default:
		t.Fatal("Done not closed at LOST")
	}
	time.Sleep(1500 * time.Millisecond) // let the server expire it for sure
	p.Resume()
	c = next(t, ch, 15*time.Second)
	if c.State != recipe.StateReconnected || c.SessionID == id || s.ID() != c.SessionID {
		t.Fatalf("got %+v, want RECONNECTED with a new session (old %x)", c, id)
	}
	if s.Done() == done {
		t.Fatal("Done must be a new channel for the new session")
	}
}

// TestC19_SlowListenerDoesNotBlockEvents: a listener that never reads must
// not stall go-zookeeper's event delivery: the session keeps reconnecting
// and working.
func TestC19_SlowListenerDoesNotBlockEvents(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	s := connect(t, cl.Servers(), WithDialer(p.Dial), WithSessionTimeout(4*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_ = s.Listen(ctx) // never read
	for i := 0; i < 3; i++ {
		p.Cut()
		waitState(t, s, recipe.StateSuspended)
		p.Resume()
		waitState(t, s, recipe.StateReconnected)
	}
	q, err := NewQueue(s, "/c19", []string{"n-"}, FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	l, err := q.TryAcquire(context.Background(), "n-", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func waitState(t *testing.T, s *Session, want recipe.ConnState) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("state %v, want %v", s.State(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestClosedSessionState(t *testing.T) {
	t.Parallel()
	s := connect(t, zktest.Shared(t).Servers())
	done := s.Done()
	s.Close()
	s.Close() // idempotent
	if s.State() != recipe.StateLost {
		t.Fatalf("state after Close %v", s.State())
	}
	select {
	case <-done:
	default:
		t.Fatal("Done open after Close")
	}
	if _, err := NewQueue(s, "/x", []string{"n-"}, FirstHolds); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Fatalf("NewQueue after Close: %v", err)
	}
	if _, ok := <-s.Listen(context.Background()); ok {
		t.Fatal("Listen on a closed session must return a closed channel")
	}
}

// TestC3_AdoptOnlyCurrentSessionsNode: the GUID look-up after a lost create
// reply finds a node carrying our GUID but owned by another session (the
// dying session of case C3): it must not be adopted.
func TestC3_AdoptOnlyCurrentSessionsNode(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	a := connect(t, cl.Servers())
	other := connect(t, cl.Servers())
	q, err := NewQueue(a, "/c3", []string{"lock-"}, FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	guid := newGUID()
	oq, _ := NewQueue(other, "/c3", []string{"lock-"}, FirstHolds)
	if err := oq.d.ensureDir(); err != nil {
		t.Fatal(err)
	}
	// The other session creates a node with A's GUID (as a dying session of A would have).
	if _, err := other.conn.Create(oq.d.adir+"/"+nodePrefix(guid, "lock-", false, 0), nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	name, err := q.d.findByGUID(guid)
	if err != nil || name != "" {
		t.Fatalf("findByGUID adopted %q (%v): a node of another session", name, err)
	}
	// A node of A's own session with that GUID is adopted, and its path is
	// the chroot-relative one the create used (no doubled chroot).
	p, err := a.conn.Create(q.d.adir+"/"+nodePrefix(guid, "lock-", false, 0), nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	name, err = q.d.findByGUID(guid)
	if err != nil || q.d.adir+"/"+name != p {
		t.Fatalf("findByGUID = %q, %v; want %s", name, err, p)
	}
	if a.chroot == "" || q.d.adir != a.chroot+"/c3" {
		t.Fatalf("chroot not applied: %q %q", a.chroot, q.d.adir)
	}
}

// TestServerRestartKeepsSession: the standalone server is stopped and
// restarted within the session timeout: SUSPENDED, then RECONNECTED to the
// same session; a lease granted before ends at SUSPENDED (default policy)
// and its surviving node is deleted on reconnection.
func TestServerRestartKeepsSession(t *testing.T) {
	t.Parallel()
	cl := zktest.Start(t)
	s := connect(t, cl.Servers(), WithSessionTimeout(10*time.Second))
	id := s.ID()
	q, err := NewQueue(s, "/restart", []string{"n-"}, FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	l, err := q.Acquire(context.Background(), "n-", nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := cl.Stop(0); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, recipe.StateSuspended)
	if !errors.Is(context.Cause(l.Context()), recipe.ErrSuspended) {
		t.Fatalf("lease cause %v", context.Cause(l.Context()))
	}
	t.Logf("stopped and suspended after %v", time.Since(t0))
	if err := cl.Restart(0); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted after %v", time.Since(t0))
	waitState(t, s, recipe.StateReconnected)
	t.Logf("reconnected after %v", time.Since(t0))
	if s.ID() != id {
		t.Fatalf("new session %x after a restart within the timeout", s.ID())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := q.Participants(context.Background())
		if err == nil && len(p) == 0 && s.cleaner.pending() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphaned node not cleaned: %v %v, pending %d", p, err, s.cleaner.pending())
		}
		time.Sleep(20 * time.Millisecond)
	}
	l2, err := q.TryAcquire(context.Background(), "n-", nil)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= l.Token() {
		t.Fatal("token did not grow")
	}
	if err := l2.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestStaleDeletionAfterPauseIsASessionLoss: a process paused past its
// session timeout reads, when it resumes, the notifications that waited in
// its socket, such as the deletion of its own lock node by the server's
// expiry of its session. That loss must be reported as what it is (the
// connection suspended past the deadline, or the session lost), not as
// recipe.ErrNodeDeleted, "deleted by someone else while the session lived". The
// pause is simulated: no server reply gets through (blackhole) and the last
// reply is set back past the session timeout before the stale event is
// delivered, as go-zookeeper would deliver it.
func TestStaleDeletionAfterPauseIsASessionLoss(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	s := connect(t, cl.Servers(), WithDialer(p.Dial), WithSessionTimeout(10*time.Second))
	q, err := NewQueue(s, "/paused", []string{"lock-"}, FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := q.Acquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	// The pause: the deadlines passed while their timers could not run.
	past := time.Now().Add(-11 * time.Second)
	s.wire.lastReply.Store(past.UnixNano())
	o := &ownership{revokeAfter: s.cfg.policy.revokeAfter(10 * time.Second), timeout: 10 * time.Second}
	o.suspend = grant.NewDeadline(past, o.revokeAfter, func() {})
	o.expire.Store(grant.NewDeadline(past, o.timeout, func() {}))
	s.conns.deadlines.Swap(o).stop()
	s.onEvent(zk.Event{Type: zk.EventNodeDeleted, Path: s.abs(l.(*lease).Path())})
	cause := context.Cause(l.Context())
	if errors.Is(cause, recipe.ErrNodeDeleted) || !(errors.Is(cause, recipe.ErrSuspended) || errors.Is(cause, recipe.ErrSessionLost)) {
		t.Fatalf("cause %v; want the suspension or the session's loss", cause)
	}
}
