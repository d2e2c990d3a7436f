// Package conntrack keeps the connections a dial function made, so that
// they can all be closed: client-go keeps idle HTTP/2 connections (and
// their read loops) in transports it caches for the process's lifetime,
// so a closed Session or test cluster would otherwise leave them behind.
// Used by the k8slease Session and its test harness, k8stest.
package conntrack

import (
	"context"
	"net"
	"sync"
)

// Tracker keeps the connections of its Dial until they close. Giving
// client-go a dial function of its own also gives a client a transport of
// its own (client-go shares a transport only between configs with the
// same dial function).
type Tracker struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu     sync.Mutex
	open   map[net.Conn]struct{}
	closed bool
}

// New tracks the connections of dial (nil: a net.Dialer's).
func New(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *Tracker {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return &Tracker{dial: dial, open: map[net.Conn]struct{}{}}
}

// Dial dials and tracks the connection; after CloseAll it refuses
// (net.ErrClosed).
func (c *Tracker) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
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

// CloseAll closes every connection and refuses later dials.
func (c *Tracker) CloseAll() {
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
	c    *Tracker
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
