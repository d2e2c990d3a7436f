package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"go.uber.org/goleak"
)

func TestConnectUnreachable(t *testing.T) {
	t.Parallel()
	p := serverkit.NewFaultProxy()
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
	t.Parallel()
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
	// Not parallel: it looks for leaked goroutines in the whole process.
	leaks := goleak.IgnoreCurrent()
	h := newHungServer(t)
	addr := h.ln.Addr().String()
	for name, c := range map[string]struct {
		ctx  func() (context.Context, context.CancelFunc)
		opts []Option
		end  time.Duration // when Connect should give up
		want []error       // what the error matches, of ErrUnreachable, Canceled, DeadlineExceeded
	}{
		"ctx deadline": {func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 300*time.Millisecond)
		}, []Option{WithConnectTimeout(time.Minute)}, 300 * time.Millisecond, []error{recipe.ErrUnreachable, context.DeadlineExceeded}},
		"cancel": {func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(500*time.Millisecond, cancel)
			return ctx, cancel
		}, []Option{WithConnectTimeout(time.Minute)}, 500 * time.Millisecond, []error{context.Canceled}},
		"connect timeout": {func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, []Option{WithConnectTimeout(time.Second)}, time.Second, []error{recipe.ErrUnreachable}},
	} {
		ctx, cancel := c.ctx()
		start := time.Now()
		_, err := Connect(ctx, []string{addr}, c.opts...)
		late := time.Since(start) - c.end
		cancel()
		// Issue 37 item 9: a cancelled ctx is context.Canceled alone, as on
		// every backend, not recipe.ErrUnreachable.
		var got []error
		for _, e := range []error{recipe.ErrUnreachable, context.Canceled, context.DeadlineExceeded} {
			if errors.Is(err, e) {
				got = append(got, e)
			}
		}
		if !slices.Equal(got, c.want) || !strings.Contains(err.Error(), "accepted the connection but sent no handshake reply") {
			t.Fatalf("%s: %v, want %v alone, saying the server did not answer", name, err, c.want)
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
