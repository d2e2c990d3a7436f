package memlock

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/life"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Session is one client process of a Server, with its own server session
// and its own simulated network link: the unit that CutOff, Heal and Crash
// act on. Its Mutexes share the session, as a process's locks share its
// ZooKeeper session or etcd lease. It is safe for concurrent use.
type Session struct {
	srv     *Server
	g       *life.Group // closed by Close or Crash; runs keepAlive
	metrics recipe.Metrics
	log     *slog.Logger

	mu  sync.Mutex
	cut bool
	sid int64 // current server session; 0: open one at the next request
	// deadline is the ownership deadline, TTL/2 after the send of the
	// newest answered request; nil once it passed (every lease was given
	// up) until a request is answered in time again.
	deadline *grant.Deadline
	leases   map[*lease]struct{} // live leases
	orphans  []orphan            // entries to delete once the Server is reachable
}

// orphan is an entry of session sid that a lease or a waiter gave up
// without being able to delete it.
type orphan struct {
	sid, eid int64
	lost     bool // a granted lease that ended other than by Release: its removal is unclean (lock-delay)
}

// SessionOption configures Connect.
type SessionOption func(*Session)

// WithMetrics reports the Session's events to m (nil: none, the default),
// with kind "lock" and dir the lock's name as given to New: AcquireStarted
// and AcquireDone for every Acquire and TryAcquire, Waiting while an
// Acquire waits behind another holder, and LeaseLost when a lease ends
// other than by its Release. A Session has no connection to report, so
// SessionState is never called; nor is StaleRejected (wire it to a
// fence's OnStale, at the resource).
func WithMetrics(m recipe.Metrics) SessionOption { return func(c *Session) { c.metrics = m } }

// WithLogger sets the logger of lost leases (default slog.Default(); nil
// means the default): WARN "memlock: lease lost" with the lock, the token
// and the cause, DEBUG for recipe.ErrSessionClosed.
func WithLogger(l *slog.Logger) SessionOption { return func(c *Session) { c.log = l } }

// Connect returns a new Session of the Server. It opens its server session
// at once, or at its first request if the Server is closed. Close it when
// done: it runs a keep-alive goroutine.
func (s *Server) Connect(opts ...SessionOption) *Session {
	c := &Session{srv: s, g: life.New(), leases: map[*lease]struct{}{}}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	c.mu.Lock()
	c.sid, _ = s.open() // 0 on a closed Server: call opens one later
	c.armLocked(time.Now())
	c.mu.Unlock()
	c.g.Go(c.keepAlive)
	return c
}

// call sends one request. A cut-off or crashed Session's request does not
// reach the Server. An answered request proves contact as of its send time;
// errExpired ends the server session (and becomes recipe.ErrSessionLost).
func (c *Session) call(req func(sid int64) error) (int64, error) {
	c.mu.Lock()
	if c.g.Closed() {
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
	if sid == c.sid {
		c.ackLocked(sent)
	}
	return sid, err
}

// armLocked starts an ownership deadline TTL/2 after sent. When it passes
// with no later answered request, every lease ends (the Server may expire
// the session from TTL on).
func (c *Session) armLocked(sent time.Time) {
	var d *grant.Deadline
	d = grant.NewDeadline(sent, c.srv.ttl/2, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.deadline == d { // d is read under c.mu, as it was written
			c.suspendLocked()
		}
	})
	c.deadline = d
}

// ackLocked records that a request sent at sent was answered: the deadline
// moves to TTL/2 after it, or, if it had passed (the leases were given
// up), starts again, unless the answer came too late to count.
func (c *Session) ackLocked(sent time.Time) {
	switch {
	case c.deadline != nil:
		c.deadline.Ack(sent)
	case !c.g.Closed() && time.Now().Before(sent.Add(c.srv.ttl/2)):
		c.armLocked(sent)
	}
}

// suspendLocked ends every lease (recipe.ErrSuspended) when the deadline
// passed; their entries are deleted once the Server can be reached.
func (c *Session) suspendLocked() {
	if c.g.Closed() || c.srv.mut == noWatchdog {
		return
	}
	c.deadline = nil
	for l := range c.leases {
		c.orphans = append(c.orphans, orphan{l.sid, l.eid, true})
		c.endLocked(l, recipe.ErrSuspended)
	}
}

// loseSessionLocked handles an expired server session: its entries are gone.
func (c *Session) loseSessionLocked(sid int64) {
	if sid != c.sid {
		return
	}
	c.sid = 0
	for l := range c.leases {
		c.endLocked(l, recipe.ErrSessionLost)
	}
	c.orphans = nil
}

// endLocked ends a live lease with cause (the core reports a loss).
func (c *Session) endLocked(l *lease, cause error) {
	delete(c.leases, l)
	l.End(cause)
}

// keepAlive pings every TTL/5 and deletes orphaned entries once the Server
// is reachable.
func (c *Session) keepAlive() {
	tick := time.NewTicker(c.srv.ttl / 5)
	defer tick.Stop()
	for {
		select {
		case <-c.g.Context().Done():
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
		return c.srv.remove(sid, o.eid, !o.lost)
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
	if sid, _ := c.end(); c.srv.mut == instantExpiry {
		c.srv.close(sid)
	}
}

// Close ends the Session in order: every lease ends (cause
// recipe.ErrSessionClosed), and, when the Server can be reached, the server
// session is closed, which removes its entries at once (otherwise the
// Server expires it after the TTL). It always returns nil, and is
// idempotent.
func (c *Session) Close() error {
	if sid, reachable := c.end(); reachable {
		c.srv.close(sid)
	}
	return nil
}

// end closes the Session (the first Close or Crash), ends its leases and
// waits for its goroutine. It returns the server session and whether the
// Server can be told (this call closed a Session that was not cut off and
// had a server session).
func (c *Session) end() (sid int64, reachable bool) {
	c.mu.Lock()
	reachable = c.g.Close() && !c.cut && c.sid != 0
	if c.deadline != nil {
		c.deadline.Stop()
	}
	for l := range c.leases {
		c.endLocked(l, recipe.ErrSessionClosed)
	}
	sid = c.sid
	c.mu.Unlock()
	c.g.Wait()
	return sid, reachable
}
