package serverkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// FaultProxy sits between a client and its servers (of any backend), in
// the same process, and injects network faults: cut connections, a
// partition (blackhole) and added latency. Plug it into the client's dialer
// (Dial for go-zookeeper's zk.WithDialer, DialContext for most others) or,
// for a client that takes only host:port, give it the address Listen
// returns.
// Each Dial connects to the real address and hands the client one end of a
// net.Pipe (which supports deadlines); goroutines copy between the other end
// and the real connection, as the proxy's state allows. A FaultProxy can serve
// any number of clients and addresses. Its methods are safe for concurrent
// use. The zero value is not usable: call NewFaultProxy.
type FaultProxy struct {
	mu      sync.Mutex
	mode    proxyMode
	latency time.Duration
	closed  bool
	conns   map[*proxyConn]struct{}
	// listeners are Listen's; lwg counts their accept loops and the
	// connections being attached.
	listeners map[net.Listener]struct{}
	lwg       sync.WaitGroup
}

type proxyMode int

const (
	modeForward proxyMode = iota
	modeCut
	modeBlackhole
)

// NewFaultProxy returns a proxy that forwards everything, with no latency.
func NewFaultProxy() *FaultProxy {
	return &FaultProxy{conns: make(map[*proxyConn]struct{})}
}

// errProxyClosed is returned by Dial after Close.
var errProxyClosed = errors.New("serverkit: fault proxy is closed")

// Dial has the signature of go-zookeeper's zk.Dialer. It connects to address
// within timeout and returns the client's end of a pipe to it. While the
// proxy is cut it fails at once with an error wrapping syscall.ECONNREFUSED;
// while it is blackholed it does not reach the server at all and returns a
// connection that swallows what the client writes and never answers, until
// Resume closes it. After Close it fails.
func (p *FaultProxy) Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	client, inner := net.Pipe()
	err := p.attach(inner, address, func() (net.Conn, error) {
		return net.DialTimeout(network, address, timeout)
	})
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return client, nil
}

// Listen makes the proxy reachable over TCP, for clients in other processes
// or that take only a host:port: it listens on a free port of 127.0.0.1 and
// returns that address; each connection accepted there is forwarded to
// target (host:port) exactly as Dial forwards, under the same cut,
// blackhole and latency (a connection accepted while cut is closed at
// once). On loopback, the connection to target is made from the client's
// own source address (127.0.1.7, say), so that the server's per-address
// limits (ZooKeeper's maxClientCnxns) count clients as without the proxy.
// Listen may be called for several targets; Close stops every listener.
// It fails after Close, or when no port can be opened.
func (p *FaultProxy) Listen(target string) (string, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return "", fmt.Errorf("serverkit: fault proxy: listen for %q: %w", target, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = l.Close()
		return "", errProxyClosed
	}
	if p.listeners == nil {
		p.listeners = make(map[net.Listener]struct{})
	}
	p.listeners[l] = struct{}{}
	loopbackTarget := host == "localhost" || net.ParseIP(host).IsLoopback()
	p.lwg.Add(1)
	go func() {
		defer p.lwg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed by Close
			}
			p.lwg.Add(1)
			go func() {
				defer p.lwg.Done()
				d := net.Dialer{Timeout: DefaultDialTimeout}
				if src, ok := c.RemoteAddr().(*net.TCPAddr); ok && loopbackTarget && src.IP.IsLoopback() {
					d.LocalAddr = &net.TCPAddr{IP: src.IP}
				}
				if err := p.attach(c, target, func() (net.Conn, error) { return d.Dial("tcp", target) }); err != nil {
					_ = c.Close()
				}
			}()
		}
	}()
	return l.Addr().String(), nil
}

// attach forwards inner, the proxy's end of a client connection, to the
// connection dial opens to address, as the proxy's state allows; on an
// error it has closed what it opened (not inner).
func (p *FaultProxy) attach(inner net.Conn, address string, dial func() (net.Conn, error)) error {
	p.mu.Lock()
	closed, mode := p.closed, p.mode
	p.mu.Unlock()
	switch {
	case closed:
		return errProxyClosed
	case mode == modeCut:
		return fmt.Errorf("serverkit: fault proxy: dial %s: cut: %w", address, syscall.ECONNREFUSED)
	}
	var real net.Conn
	if mode != modeBlackhole {
		var err error
		if real, err = dial(); err != nil {
			return err
		}
	}
	pc := &proxyConn{p: p, inner: inner, real: real, done: make(chan struct{})}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.mode == modeCut {
		if real != nil {
			_ = real.Close()
		}
		if p.closed {
			return errProxyClosed
		}
		return fmt.Errorf("serverkit: fault proxy: dial %s: cut: %w", address, syscall.ECONNREFUSED)
	}
	if p.mode == modeBlackhole {
		pc.blackholed.Store(true)
	}
	p.conns[pc] = struct{}{}
	if real == nil {
		pc.wg.Add(1)
		go pc.swallow()
	} else {
		pc.pump(inner, real)
		pc.pump(real, inner)
	}
	return nil
}

// DialContext is Dial with the signature most client libraries take for a
// custom dialer (go-redis's Options.Dialer, pgx's DialFunc, and with the
// network fixed gRPC's WithContextDialer): the timeout is ctx's deadline,
// or DefaultDialTimeout when ctx has none. A ctx already done fails at
// once; its cancellation does not interrupt a dial in progress.
func (p *FaultProxy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timeout := DefaultDialTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Millisecond) // 0 would mean no timeout
	}
	return p.Dial(network, address, timeout)
}

// BlackholeFor blackholes the proxy for d (see Blackhole) and then resumes
// it, or resumes it early when ctx ends. It blocks meanwhile.
func (p *FaultProxy) BlackholeFor(ctx context.Context, d time.Duration) {
	p.Blackhole()
	defer p.Resume()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// DefaultDialTimeout bounds DialContext when its ctx has no deadline.
const DefaultDialTimeout = 10 * time.Second

// Cut closes every live connection now (clients see EOF or a closed pipe)
// and makes Dial fail at once until Resume. It returns when the closed
// connections' goroutines have ended.
func (p *FaultProxy) Cut() {
	p.mu.Lock()
	p.mode = modeCut
	conns := p.snapshot(func(*proxyConn) bool { return true })
	p.mu.Unlock()
	closeAll(conns)
}

// Blackhole partitions the client from the servers: live and new connections
// stay open, but nothing is forwarded in either direction, so clients notice
// only through their own read timeouts. A side that closes its connection
// meanwhile is not seen by the other either: as in a real partition, the
// close is lost with the data (the server keeps a silent connection until its
// own timeouts end it). It lasts until Resume, which closes the connections
// that were blackholed (the bytes they swallowed are lost, as in a real
// partition, where the client will have timed out anyway).
func (p *FaultProxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = modeBlackhole
	for pc := range p.conns {
		pc.blackholed.Store(true)
	}
}

// Resume ends Cut or Blackhole: Dial connects again and data flows. It closes
// the connections that were blackholed and returns when their goroutines have
// ended.
func (p *FaultProxy) Resume() {
	p.mu.Lock()
	p.mode = modeForward
	conns := p.snapshot(func(pc *proxyConn) bool { return pc.blackholed.Load() })
	p.mu.Unlock()
	closeAll(conns)
}

// SetLatency delays every chunk of forwarded data by d in each direction (a
// request/response round trip gains 2d); 0 or less removes the delay. It
// applies to data read after the call. Order is kept.
func (p *FaultProxy) SetLatency(d time.Duration) {
	if d < 0 {
		d = 0
	}
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Close stops Listen's listeners, closes every connection and makes Dial
// and Listen fail from now on. It returns when all of the proxy's
// goroutines have ended. It is idempotent.
func (p *FaultProxy) Close() {
	p.mu.Lock()
	p.closed = true
	ls := p.listeners
	p.listeners = nil
	p.mu.Unlock()
	for l := range ls {
		_ = l.Close()
	}
	p.lwg.Wait() // no connection is attached after this
	p.mu.Lock()
	conns := p.snapshot(func(*proxyConn) bool { return true })
	p.mu.Unlock()
	closeAll(conns)
}

func (p *FaultProxy) snapshot(keep func(*proxyConn) bool) []*proxyConn {
	var out []*proxyConn
	for pc := range p.conns {
		if keep(pc) {
			out = append(out, pc)
		}
	}
	return out
}

func (p *FaultProxy) currentLatency() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency
}

func closeAll(conns []*proxyConn) {
	for _, pc := range conns {
		pc.close()
	}
	for _, pc := range conns {
		pc.wg.Wait()
	}
}

// proxyConn is one client connection through the proxy.
type proxyConn struct {
	p          *FaultProxy
	inner      net.Conn // the proxy's end of the pipe
	real       net.Conn // the server connection; nil when born blackholed
	blackholed atomic.Bool
	done       chan struct{}
	once       sync.Once
	wg         sync.WaitGroup
}

// close ends the connection; its goroutines end soon after (see wg).
func (pc *proxyConn) close() {
	pc.once.Do(func() {
		close(pc.done)
		_ = pc.inner.Close()
		if pc.real != nil {
			_ = pc.real.Close()
		}
		pc.p.mu.Lock()
		delete(pc.p.conns, pc)
		pc.p.mu.Unlock()
	})
}

// swallow reads and drops what the client writes on a connection opened
// during a blackhole.
func (pc *proxyConn) swallow() {
	defer pc.wg.Done()
	buf := make([]byte, 4096)
	for {
		if _, err := pc.inner.Read(buf); err != nil {
			pc.close()
			return
		}
	}
}

type chunk struct {
	b   []byte
	due time.Time
}

// pump copies src to dst with a reader and a writer goroutine, so that
// latency delays data without stopping the reads behind it.
func (pc *proxyConn) pump(src, dst net.Conn) {
	ch := make(chan chunk, 64)
	pc.wg.Add(2)
	go func() { // reader
		defer pc.wg.Done()
		defer close(ch)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 && !pc.blackholed.Load() {
				c := chunk{b: buf[:n]}
				if d := pc.p.currentLatency(); d > 0 {
					c.due = time.Now().Add(d)
				}
				select {
				case ch <- c:
				case <-pc.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { // writer
		defer pc.wg.Done()
		// However this ends (source closed after the queue drained, write
		// error, or close), the whole connection goes.
		defer pc.close()
		var timer *time.Timer
		defer func() {
			if timer != nil {
				timer.Stop()
			}
		}()
		for {
			var c chunk
			var ok bool
			select {
			case c, ok = <-ch:
				if !ok && pc.blackholed.Load() {
					// The source closed during a partition: the close
					// does not cross it. Resume or Close ends this.
					<-pc.done
					return
				}
				if !ok {
					return
				}
			case <-pc.done:
				return
			}
			if wait := time.Until(c.due); !c.due.IsZero() && wait > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
				} else {
					timer.Reset(wait)
				}
				select {
				case <-timer.C:
				case <-pc.done:
					return
				}
			}
			if pc.blackholed.Load() {
				continue
			}
			if _, err := dst.Write(c.b); err != nil {
				return
			}
		}
	}()
}
