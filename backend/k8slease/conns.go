package k8slease

import (
	"context"
	"net"
	"sync"
)

// conns are the connections of a client that Connect made: Close closes
// them all, so that a closed Session leaves no connection (and no HTTP/2
// read loop) behind. Giving client-go a dial function of our own also
// gives the Session a transport of its own (client-go shares a transport
// only between configs with the same dial function).
type conns struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu     sync.Mutex
	open   map[net.Conn]struct{}
	closed bool
}

// newConns tracks the connections of dial (nil: a net.Dialer's).
func newConns(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *conns {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return &conns{dial: dial, open: map[net.Conn]struct{}{}}
}

// Dial dials and tracks the connection; after closeAll it refuses.
func (c *conns) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = conn.Close()
		return nil, net.ErrClosed
	}
	t := &trackedConn{Conn: conn, c: c}
	c.open[t] = struct{}{}
	return t, nil
}

// closeAll closes every connection and refuses later dials.
func (c *conns) closeAll() {
	c.mu.Lock()
	c.closed = true
	open := c.open
	c.open = nil
	c.mu.Unlock()
	for conn := range open {
		_ = conn.(*trackedConn).Conn.Close()
	}
}

// trackedConn forgets itself when closed.
type trackedConn struct {
	net.Conn
	c    *conns
	once sync.Once
}

// Close closes the connection and forgets it.
func (t *trackedConn) Close() error {
	t.once.Do(func() {
		t.c.mu.Lock()
		delete(t.c.open, t)
		t.c.mu.Unlock()
	})
	return t.Conn.Close()
}
