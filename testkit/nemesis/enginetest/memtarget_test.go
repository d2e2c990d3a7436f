package enginetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// memTarget is backend/memlock as a Target, so that the engine can be
// tested without a server. memlock has no network: each Session's link to
// its Server is simulated (CutOff, Heal), and here that link follows the
// client's FaultProxy: a heartbeat goes through the proxy to an echo
// listener every 20 ms, and while it fails (cut, blackholed, too slow) the
// Session is cut off. So the engine's client faults act on memlock as
// they act on a networked backend, whose connection the proxy carries.
// Its own register is an in-memory fenced register; it has no fault kinds
// of its own.
type memTarget struct {
	srv  *memlock.Server
	echo net.Listener
	base string

	mu    sync.Mutex
	reg   nemesis.State
	seq   int64
	links []*memLink
}

func newMemTarget(ttl time.Duration) (*memTarget, error) {
	srv, err := memlock.NewServer(memlock.WithTTL(ttl))
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return &memTarget{srv: srv, echo: l}, nil
}

func (t *memTarget) Name() string { return "mem" }

func (t *memTarget) Prepare(_ context.Context, base string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.base, t.reg, t.seq, t.links = base, nemesis.State{}, 0, nil
	return nil
}

// memLink is a Session whose link to the Server follows a proxy.
type memLink struct {
	s    *memlock.Session
	stop chan struct{}
	done chan struct{}
}

func (t *memTarget) Connect(_ context.Context, _ int, p *serverkit.FaultProxy) (nemesis.Client, error) {
	l := &memLink{s: t.srv.Connect(memlock.WithLogger(slog.New(slog.DiscardHandler))), stop: make(chan struct{}), done: make(chan struct{})}
	go l.follow(p, t.echo.Addr().String())
	t.mu.Lock()
	t.links = append(t.links, l)
	t.mu.Unlock()
	return l, nil
}

// follow cuts the Session off while a heartbeat through p fails, and heals
// it when one succeeds again.
func (l *memLink) follow(p *serverkit.FaultProxy, addr string) {
	defer close(l.done)
	var conn net.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	b := []byte{1}
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		var err error
		if conn == nil {
			conn, err = p.Dial("tcp", addr, 100*time.Millisecond)
		}
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(100 * time.Millisecond))
			if _, err = conn.Write(b); err == nil {
				_, err = io.ReadFull(conn, b)
			}
		}
		if err != nil {
			l.s.CutOff()
			if conn != nil {
				conn.Close()
				conn = nil
			}
			continue
		}
		l.s.Heal()
	}
}

func (l *memLink) Lock(name string) (recipe.Lock, error) { return memlock.New(l.s, name) }

func (l *memLink) Close() error {
	close(l.stop)
	<-l.done
	l.s.Heal() // so that Close tells the Server
	return l.s.Close()
}

func (t *memTarget) SessionTimeout() time.Duration { return t.srv.TTL() }
func (t *memTarget) Faults() []nemesis.FaultKind   { return nil }
func (t *memTarget) Heal(context.Context) error    { return nil }
func (t *memTarget) Diagnose(context.Context) []string {
	return []string{fmt.Sprintf("%d entries on %s", t.srv.Entries(t.base+"/lock"), t.base+"/lock")}
}

// Registers is an in-memory fenced register: a write applies iff its token
// is at least the stored one.
func (t *memTarget) Registers() []nemesis.Register {
	return []nemesis.Register{{Name: "mem", Write: func(_ context.Context, _ int, token fence.Token, val string, live func()) (nemesis.State, int64, error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if token < t.reg.Token {
			return nemesis.State{}, 0, fmt.Errorf("token %d below %d: %w", token, t.reg.Token, fence.ErrStale)
		}
		prev := t.reg
		t.reg, t.seq = nemesis.State{Token: token, Value: val}, t.seq+1
		live()
		return prev, t.seq, nil
	}}}
}

func (t *memTarget) Leftovers(context.Context) ([]string, error) {
	if n := t.srv.Entries(t.base + "/lock"); n > 0 {
		return []string{fmt.Sprintf("%d entries on %s", n, t.base+"/lock")}, nil
	}
	return nil, nil
}

func (t *memTarget) Close() error {
	err := t.echo.Close()
	t.srv.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
