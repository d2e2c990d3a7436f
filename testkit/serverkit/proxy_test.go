package serverkit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// echoServer accepts connections on 127.0.0.1 and echoes what it reads. It
// stops, with all its goroutines, at cleanup.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// roundTrip writes msg and reads it back within d.
func roundTrip(c net.Conn, msg string, d time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return errors.New("echo mismatch: " + string(buf))
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestFaultProxyStates(t *testing.T) {
	addr := echoServer(t)
	p := NewFaultProxy()
	defer p.Close()

	c1, err := p.Dial("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if err := roundTrip(c1, "hello", 2*time.Second); err != nil {
		t.Fatalf("forwarding: %v", err)
	}

	// Blackhole: the write is swallowed, the read times out, the connection
	// stays open; a new dial also gets a silent connection.
	p.Blackhole()
	if err := roundTrip(c1, "lost", 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("blackholed round trip: %v, want a timeout", err)
	}
	c2, err := p.Dial("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dial during blackhole: %v", err)
	}
	defer c2.Close()
	if err := roundTrip(c2, "lost", 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("round trip on a connection opened during blackhole: %v, want a timeout", err)
	}

	// Resume closes the blackholed connections; new ones work.
	p.Resume()
	for _, c := range []net.Conn{c1, c2} {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Fatalf("blackholed connection after Resume: read %v, want closed", err)
		}
	}
	c3, err := p.Dial("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if err := roundTrip(c3, "again", 2*time.Second); err != nil {
		t.Fatalf("after Resume: %v", err)
	}

	// Latency applies in each direction.
	if err := slowRoundTrip(p, c3); err != nil {
		t.Fatal(err)
	}

	// Cut closes live connections and refuses dials fast.
	p.Cut()
	_ = c3.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c3.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read after Cut: %v, want closed", err)
	}
	start := time.Now()
	if _, err := p.Dial("tcp", addr, time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial during Cut: %v, want ECONNREFUSED", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("refused dial took %v", d)
	}
	p.Resume()

	// A client closing its end ends the connection's goroutines.
	c4, err := p.Dial("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c4.Close()
	Eventually(t, 2*time.Second, "connection forgotten after client close", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.conns) == 0
	})

	p.Close()
	if _, err := p.Dial("tcp", addr, time.Second); err == nil {
		t.Fatal("dial after Close succeeded")
	}
}

// TestFaultProxyBlackholeHidesClose: a client that closes its connection
// during a blackhole is not seen closing by the server (the FIN is lost in
// the partition, as the data is) until Resume ends the connection.
func TestFaultProxyBlackholeHidesClose(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	serverSawClose := make(chan struct{})
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(io.Discard, c)
		close(serverSawClose)
	}()
	p := NewFaultProxy()
	defer p.Close()
	c, err := p.Dial("tcp", l.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	_ = c.Close()
	select {
	case <-serverSawClose:
		t.Fatal("the server saw the client's close through the blackhole")
	case <-time.After(300 * time.Millisecond):
	}
	p.Resume()
	select {
	case <-serverSawClose:
	case <-time.After(5 * time.Second):
		t.Fatal("the server's connection is still open after Resume")
	}
}

// TestFaultProxyListen: a client connecting over TCP to the address Listen
// returns reaches the target from its own loopback source address, with
// the proxy's latency; Cut closes it and refuses new ones; Close stops the
// listener (goleak, in Main, checks that its goroutines ended).
func TestFaultProxyListen(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sources := make(chan string, 10)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			sources <- c.RemoteAddr().(*net.TCPAddr).IP.String()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })

	p := NewFaultProxy()
	defer p.Close()
	addr, err := p.Listen(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	dial := func() (net.Conn, error) {
		d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, 7)}}
		return d.Dial("tcp", addr)
	}
	c1, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if err := roundTrip(c1, "hello", 2*time.Second); err != nil {
		t.Fatalf("through the listener: %v", err)
	}
	if src := <-sources; src != "127.0.1.7" {
		t.Errorf("the target saw source %s, want the client's 127.0.1.7", src)
	}

	if err := slowRoundTrip(p, c1); err != nil {
		t.Error(err)
	}

	p.Cut()
	for _, c := range []net.Conn{c1, func() net.Conn { c, _ := dial(); return c }()} {
		if c == nil {
			continue // refused outright: as good
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Fatalf("read during Cut: %v, want closed", err)
		}
		_ = c.Close()
	}
	p.Resume()

	p.Close()
	if _, err := dial(); err == nil {
		t.Fatal("dial after Close succeeded")
	}
	if _, err := p.Listen(l.Addr().String()); err == nil {
		t.Fatal("Listen after Close succeeded")
	}
}

// slowRoundTrip sets 60 ms of latency on p, checks that a round trip on c
// takes at least twice that (latency applies in each direction), and sets
// it back to 0.
func slowRoundTrip(p *FaultProxy, c net.Conn) error {
	p.SetLatency(60 * time.Millisecond)
	defer p.SetLatency(0)
	start := time.Now()
	if err := roundTrip(c, "slow", 5*time.Second); err != nil {
		return err
	}
	if rtt := time.Since(start); rtt < 120*time.Millisecond {
		return fmt.Errorf("round trip with 60ms one-way latency took %v", rtt)
	}
	return nil
}
