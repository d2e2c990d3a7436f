package memlock

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Session is one client process of a Server, with its own server session
// and its own simulated network link: the unit that CutOff, Heal and Crash
// act on. Its Mutexes share the session, as a process's locks share its
// ZooKeeper session or etcd lease. It is safe for concurrent use.
type Session struct {
	srv *Server

	mu        sync.Mutex
	cut       bool
	crashed   bool
	closed    bool
	sid       int64     // current server session; 0: open one at the next request
	lastAck   time.Time // send time of the newest answered request
	suspended bool      // the watchdog fired and no request was answered since
	watchdog  *time.Timer
	leases    map[*lease]struct{} // live leases
	orphans   []orphan            // entries to delete once the Server is reachable

	quit chan struct{}
	stop sync.Once
	wg   sync.WaitGroup
}

// orphan is an entry of session sid that a lease or a waiter gave up
// without being able to delete it.
type orphan struct{ sid, eid int64 }

// Connect returns a new Session of the Server. It opens its server session
// at once, or at its first request if the Server is closed. Close it when
// done: it runs a keep-alive goroutine.
func (s *Server) Connect() *Session {
	c := &Session{srv: s, leases: map[*lease]struct{}{}, quit: make(chan struct{})}
	c.sid, _ = s.open() // 0 on a closed Server: call opens one later
	c.lastAck = time.Now()
	c.watchdog = time.AfterFunc(s.ttl/2, c.checkContact)
	c.wg.Add(1)
	go c.keepAlive()
	return c
}

// call sends one request. A cut-off or crashed Session's request does not
// reach the Server. An answered request proves contact as of its send time;
// errExpired ends the server session (and becomes recipe.ErrSessionLost).
func (c *Session) call(req func(sid int64) error) (int64, error) {
	c.mu.Lock()
	if c.closed || c.crashed {
		c.mu.Unlock()
		return 0, recipe.ErrSessionClosed
	}
	if c.cut {
		c.mu.Unlock()
		return 0, ErrUnreachable
	}
	if c.sid == 0 {
		sid, err := c.srv.open()
		if err != nil {
			c.mu.Unlock()
			return 0, err
		}
		c.sid = sid
	}
	sid := c.sid
	c.mu.Unlock()

	sent := time.Now()
	err := req(sid)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case errors.Is(err, ErrUnreachable):
		return sid, err
	case errors.Is(err, errExpired):
		c.loseSessionLocked(sid)
		return sid, fmt.Errorf("%w: %w", recipe.ErrSessionLost, err)
	}
	if sid == c.sid && sent.After(c.lastAck) {
		c.lastAck = sent
		c.suspended = false
		if !c.closed && !c.crashed && c.srv.mut != noWatchdog {
			c.watchdog.Reset(time.Until(sent.Add(c.srv.ttl / 2)))
		}
	}
	return sid, err
}

// checkContact is the watchdog: without an answered request sent in the last
// TTL/2, every lease ends (the Server may expire the session from TTL on).
func (c *Session) checkContact() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.crashed || c.srv.mut == noWatchdog {
		return
	}
	if wait := time.Until(c.lastAck.Add(c.srv.ttl / 2)); wait > 0 {
		c.watchdog.Reset(wait)
		return
	}
	c.suspended = true
	for l := range c.leases {
		c.orphans = append(c.orphans, orphan{l.sid, l.eid})
		c.endLocked(l, recipe.ErrSuspended)
	}
}

// loseSessionLocked handles an expired server session: its entries are gone.
func (c *Session) loseSessionLocked(sid int64) {
	if sid != c.sid {
		return
	}
	c.sid = 0
	c.suspended = false
	for l := range c.leases {
		c.endLocked(l, recipe.ErrSessionLost)
	}
	c.orphans = nil
}

func (c *Session) endLocked(l *lease, cause error) {
	delete(c.leases, l)
	l.cancel(cause)
}

// keepAlive pings every TTL/5 and deletes orphaned entries once the Server
// is reachable.
func (c *Session) keepAlive() {
	defer c.wg.Done()
	tick := time.NewTicker(c.srv.ttl / 5)
	defer tick.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-tick.C:
		}
		if _, err := c.call(c.srv.touch); err != nil {
			continue
		}
		c.mu.Lock()
		orphans := c.orphans
		c.orphans = nil
		c.mu.Unlock()
		for _, o := range orphans {
			c.removeEntry(o)
		}
	}
}

// removeEntry deletes entry o, or queues it for the keep-alive loop when the
// Server can't be reached. An entry of an expired session went with it.
func (c *Session) removeEntry(o orphan) error {
	_, err := c.call(func(sid int64) error {
		if sid != o.sid {
			return nil // its session expired: the entry went with it
		}
		return c.srv.remove(sid, o.eid)
	})
	if errors.Is(err, ErrUnreachable) {
		c.mu.Lock()
		c.orphans = append(c.orphans, o)
		c.mu.Unlock()
	}
	return err
}

// CutOff partitions the Session from the Server until Heal: its requests
// and keep-alives fail without reaching the Server. Its leases end
// (recipe.ErrSuspended) TTL/2 after the send of its last answered request,
// before the Server can expire its session (TTL after the last request it
// received); a waiting Acquire keeps waiting.
func (c *Session) CutOff() {
	c.mu.Lock()
	c.cut = true
	c.mu.Unlock()
}

// Heal ends CutOff. The Session recovers by itself: it deletes the entries
// of the leases it gave up, or, if the Server expired its session, opens a
// new one at its next request.
func (c *Session) Heal() {
	c.mu.Lock()
	c.cut = false
	c.mu.Unlock()
}

// Crash simulates the death of the client process: every lease ends (cause
// recipe.ErrSessionClosed, as nobody is left to act on it), the keep-alives
// stop, and the Server is not told: it grants the Session's locks to others
// when it expires the session, TTL after the last request it received.
// Every later call on the Session or its Mutexes returns
// recipe.ErrSessionClosed.
func (c *Session) Crash() {
	if sid, _ := c.end(true); c.srv.mut == instantExpiry {
		c.srv.close(sid)
	}
}

// Close ends the Session in order: every lease ends (cause
// recipe.ErrSessionClosed), and, when the Server can be reached, the server
// session is closed, which removes its entries at once (otherwise the
// Server expires it after the TTL). It always returns nil, and is
// idempotent.
func (c *Session) Close() error {
	if sid, reachable := c.end(false); reachable {
		c.srv.close(sid)
	}
	return nil
}

// end marks the Session crashed or closed, ends its leases and stops its
// goroutine. It returns the server session and whether the Server can be
// told (the Session was live, not cut off, and had a server session).
func (c *Session) end(crash bool) (sid int64, reachable bool) {
	c.mu.Lock()
	reachable = !c.cut && !c.crashed && !c.closed && c.sid != 0
	if crash {
		c.crashed = true
	} else {
		c.closed = true
	}
	c.watchdog.Stop()
	for l := range c.leases {
		c.endLocked(l, recipe.ErrSessionClosed)
	}
	sid = c.sid
	c.mu.Unlock()
	c.stopKeepAlive()
	return sid, reachable
}

func (c *Session) stopKeepAlive() {
	c.stop.Do(func() { close(c.quit) })
	c.wg.Wait()
}
