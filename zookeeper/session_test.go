package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { zktest.Main(m) }

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
	cl := zktest.Shared(t)
	p := zktest.NewFaultProxy()
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
	cl := zktest.Shared(t)
	p := zktest.NewFaultProxy()
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
	cl := zktest.Shared(t)
	p := zktest.NewFaultProxy()
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

func TestConnectUnreachable(t *testing.T) {
	p := zktest.NewFaultProxy()
	defer p.Close()
	p.Blackhole()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Connect(ctx, []string{"127.0.0.1:1"}, WithConnectTimeout(time.Minute), WithDialer(p.Dial))
	if !errors.Is(err, recipe.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Connect to a blackholed server: %v, want recipe.ErrUnreachable and DeadlineExceeded", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("Connect ignored ctx's deadline")
	}
	// What happened is in the error (issue 14).
	if !strings.Contains(err.Error(), "accepted the connection but sent no handshake reply") {
		t.Fatalf("the error does not say what the last attempt met: %v", err)
	}
}

// TestConnectRefusedAnswersEarly (issue 14): when nothing listens at any
// address, Connect says so, with the dial's error (errors.Is-able), about
// a second after the first refusal instead of at the end of the connect
// timeout. A server entry without a port gets 2181, and the error names it.
func TestConnectRefusedAnswersEarly(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	_, err := Connect(ctx, []string{"127.0.0.1:1,localhost:1"}, WithConnectTimeout(time.Minute))
	if !errors.Is(err, recipe.ErrUnreachable) || !errors.Is(err, syscall.ECONNREFUSED) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Connect to closed ports: %v, want recipe.ErrUnreachable and ECONNREFUSED", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("Connect to closed ports took %v (connect timeout 1m)", d)
	}
	if !regexp.MustCompile(`nothing listens at (either|any) of its \d+ addresses\)`).MatchString(err.Error()) {
		t.Errorf("the error does not count the addresses in words: %v", err)
	}
	_, err = Connect(ctx, []string{"127.0.0.1:1"}, WithConnectTimeout(time.Minute))
	if !strings.Contains(fmt.Sprint(err), "nothing listens at its address") {
		t.Errorf("one address: %v", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := Connect(dctx, []string{"127.0.0.1"}); !strings.Contains(fmt.Sprint(err), "127.0.0.1:2181") {
		t.Fatalf("a server without a port: %v, want 127.0.0.1:2181 named", err)
	}
}

func TestConnectBadOptions(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]struct {
		servers []string
		opts    []Option
		want    error
	}{
		"no servers":        {nil, nil, recipe.ErrBadOption},
		"bad chroot":        {[]string{"127.0.0.1:2181/a/"}, nil, recipe.ErrInvalidPath},
		"two chroots":       {[]string{"a:1/x", "b:2/y"}, nil, recipe.ErrInvalidPath},
		"zero timeout":      {[]string{"127.0.0.1:2181"}, []Option{WithSessionTimeout(0)}, recipe.ErrBadOption},
		"fraction too high": {[]string{"127.0.0.1:2181"}, []Option{WithSuspendPolicy(TolerateSuspension(1))}, recipe.ErrBadOption},
		"fraction too low":  {[]string{"127.0.0.1:2181"}, []Option{WithSuspendPolicy(TolerateSuspension(0.2))}, recipe.ErrBadOption},
		"empty ACL":         {[]string{"127.0.0.1:2181"}, []Option{WithACL([]zk.ACL{})}, recipe.ErrBadOption},
		"NaN fraction":      {[]string{"127.0.0.1:2181"}, []Option{WithSuspendPolicy(TolerateSuspension(math.NaN()))}, recipe.ErrBadOption},
		"1ns timeout":       {[]string{"127.0.0.1:2181"}, []Option{WithSessionTimeout(time.Nanosecond)}, recipe.ErrBadOption},
		"1000h timeout":     {[]string{"127.0.0.1:2181"}, []Option{WithSessionTimeout(1000 * time.Hour)}, recipe.ErrBadOption},
		"port 0":            {[]string{"127.0.0.1:0"}, nil, recipe.ErrBadOption},
		"port not a number": {[]string{"127.0.0.1:x"}, nil, recipe.ErrBadOption},
	} {
		if _, err := Connect(ctx, c.servers, c.opts...); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

func TestClosedSessionState(t *testing.T) {
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
	cl := zktest.Shared(t)
	a := connect(t, cl.Servers())
	other := connect(t, cl.Servers())
	q, err := NewQueue(a, "/c3", []string{"lock-"}, FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	guid := newGUID()
	oq, _ := NewQueue(other, "/c3", []string{"lock-"}, FirstHolds)
	if err := oq.ensureDir(); err != nil {
		t.Fatal(err)
	}
	// The other session creates a node with A's GUID (as a dying session of A would have).
	if _, err := other.conn.Create(oq.adir+"/"+nodePrefix(guid, "lock-", false, 0), nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	name, err := q.findByGUID(guid)
	if err != nil || name != "" {
		t.Fatalf("findByGUID adopted %q (%v): a node of another session", name, err)
	}
	// A node of A's own session with that GUID is adopted, and its path is
	// the chroot-relative one the create used (no doubled chroot).
	p, err := a.conn.Create(q.adir+"/"+nodePrefix(guid, "lock-", false, 0), nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	name, err = q.findByGUID(guid)
	if err != nil || q.adir+"/"+name != p {
		t.Fatalf("findByGUID = %q, %v; want %s", name, err, p)
	}
	if a.chroot == "" || q.adir != a.chroot+"/c3" {
		t.Fatalf("chroot not applied: %q %q", a.chroot, q.adir)
	}
}

// TestServerRestartKeepsSession: the standalone server is stopped and
// restarted within the session timeout: SUSPENDED, then RECONNECTED to the
// same session; a lease granted before ends at SUSPENDED (default policy)
// and its surviving node is deleted on reconnection.
func TestServerRestartKeepsSession(t *testing.T) {
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
	cl := zktest.Shared(t)
	p := zktest.NewFaultProxy()
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

// hungServer accepts connections and never answers: a hung ZooKeeper, or a
// load balancer in front of none.
type hungServer struct {
	ln    net.Listener
	conns chan net.Conn
}

func newHungServer(t *testing.T) *hungServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hungServer{ln: ln, conns: make(chan net.Conn, 100)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(h.conns)
				return
			}
			h.conns <- c
		}
	}()
	t.Cleanup(h.close)
	return h
}

// close stops the server and closes the connections it holds.
func (h *hungServer) close() {
	h.ln.Close()
	for c := range h.conns {
		c.Close()
	}
}

// TestConnectHungServerReturnsOnTime (issue 14): against a server that
// accepts the connection and never answers, Connect returns when ctx ends
// or the connect timeout passes, not a second later (go-zookeeper's Close
// waits that long for an answer to its close request), and the connection
// is closed by then; nothing of the attempt outlives it for long.
func TestConnectHungServerReturnsOnTime(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	h := newHungServer(t)
	addr := h.ln.Addr().String()
	for name, c := range map[string]struct {
		ctx  func() (context.Context, context.CancelFunc)
		opts []Option
		end  time.Duration // when Connect should give up
	}{
		"ctx deadline": {func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 300*time.Millisecond)
		}, []Option{WithConnectTimeout(time.Minute)}, 300 * time.Millisecond},
		"cancel": {func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(500*time.Millisecond, cancel)
			return ctx, cancel
		}, []Option{WithConnectTimeout(time.Minute)}, 500 * time.Millisecond},
		"connect timeout": {func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, []Option{WithConnectTimeout(time.Second)}, time.Second},
	} {
		ctx, cancel := c.ctx()
		start := time.Now()
		_, err := Connect(ctx, []string{addr}, c.opts...)
		late := time.Since(start) - c.end
		cancel()
		if !errors.Is(err, recipe.ErrUnreachable) || !strings.Contains(err.Error(), "accepted the connection but sent no handshake reply") {
			t.Fatalf("%s: %v, want recipe.ErrUnreachable saying the server did not answer", name, err)
		}
		// Before the fix: a second late, every time.
		if late > 700*time.Millisecond {
			t.Errorf("%s: Connect returned %v after it should have given up", name, late.Round(time.Millisecond))
		}
		// The server sees the connection closed (before the fix it stayed
		// open, go-zookeeper reading for the handshake reply).
		sc := <-h.conns
		sc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(sc); err != nil { // nil at EOF
			t.Errorf("%s: the connection was not closed: %v", name, err)
		}
		sc.Close()
	}
	// go-zookeeper's Close, left to finish on its own, ends within about a
	// second; so does everything else Connect started.
	h.close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := goleak.Find(leaks)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines of the failed Connects still run: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
