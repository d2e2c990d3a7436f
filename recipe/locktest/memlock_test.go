package locktest_test

// An in-memory, lease-based lock service and its clients: a second backend
// for recipe.Lock, with no ZooKeeper anywhere, to show that the conformance
// suite is backend-neutral. It is a real implementation, not a stub:
//
//   - the server keeps sessions that expire ttl after the last request it
//     received from them (keep-alives every ttl/5), and a FIFO queue of
//     entries per lock; an expired session's entries are removed;
//   - fencing tokens come from one server-wide counter, incremented at every
//     grant (not at enqueue, unlike ZooKeeper's czxid);
//   - a client ends its leases (ErrSuspended) when no request it sent in the
//     last ttl/2 was answered, which is before the server can expire its
//     session; after a suspension that healed before expiry it deletes the
//     entries of the leases it gave up; after an expiry it opens a new
//     session;
//   - the network is simulated per client: a cut-off client's requests fail
//     without reaching the server, and a crashed client stops everything
//     without telling the server.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

var (
	errUnreachable = errors.New("memlock: backend unreachable")
	errExpired     = errors.New("memlock: session expired")
	errNoEntry     = errors.New("memlock: no such entry")
	// errOldSession answers a request meant for a session that is no
	// longer the client's current one (its entries went with it).
	errOldSession = errors.New("memlock: request for an earlier session")
)

// mutation deliberately breaks one aspect of the backend, to show that the
// suite notices (see TestSuiteCatchesBrokenBackends).
type mutation string

const (
	correct          mutation = ""
	sameToken        mutation = "same-token"         // tokens do not grow
	instantExpiry    mutation = "instant-expiry"     // a crash frees the lock at once
	neverExpire      mutation = "never-expire"       // sessions never expire
	releaseAnyHolder mutation = "release-any-holder" // Release removes whoever holds the lock, unchecked
	noWatchdog       mutation = "no-watchdog"        // a cut-off client keeps its leases
	leakCancelled    mutation = "leak-cancelled"     // a cancelled waiter's entry stays
	ignoresContext   mutation = "ignores-context"    // Acquire waits on, whatever its context says
	tryIgnoresHolder mutation = "try-ignores-holder" // TryAcquire grants even when held
)

// memServer is the lock service.
type memServer struct {
	ttl time.Duration
	mut mutation

	mu       sync.Mutex
	closed   bool
	nextID   int64
	token    fence.Token
	sessions map[int64]*memSession
	locks    map[string]*memLock
}

type memSession struct {
	id       int64
	deadline time.Time
	timer    *time.Timer
	entries  map[int64]*memEntry
}

type memLock struct {
	queue   []*memEntry
	changed chan struct{} // closed and replaced on every change of queue
}

type memEntry struct {
	id      int64
	lock    string
	session int64
	token   fence.Token // zero until granted
}

func newMemServer(ttl time.Duration, mut mutation) *memServer {
	return &memServer{ttl: ttl, mut: mut, sessions: map[int64]*memSession{}, locks: map[string]*memLock{}}
}

// close stops the expiry timers.
func (s *memServer) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, ss := range s.sessions {
		ss.timer.Stop()
	}
}

func (s *memServer) lockLocked(name string) *memLock {
	l := s.locks[name]
	if l == nil {
		l = &memLock{changed: make(chan struct{})}
		s.locks[name] = l
	}
	return l
}

func (s *memServer) newSession() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	ss := &memSession{id: s.nextID, deadline: time.Now().Add(s.ttl), entries: map[int64]*memEntry{}}
	ss.timer = time.AfterFunc(s.ttl, func() { s.expire(ss.id) })
	s.sessions[ss.id] = ss
	return ss.id
}

// touch finds a live session and extends it: every request counts as a
// keep-alive.
func (s *memServer) touchLocked(sid int64) (*memSession, error) {
	ss := s.sessions[sid]
	if ss == nil || s.closed {
		return nil, errExpired
	}
	if s.mut != neverExpire {
		ss.deadline = time.Now().Add(s.ttl)
	}
	return ss, nil
}

// expire runs when a session's timer fires: it expires the session if its
// deadline passed, or re-arms the timer.
func (s *memServer) expire(sid int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[sid]
	if ss == nil || s.closed {
		return
	}
	if s.mut == neverExpire {
		return
	}
	if wait := time.Until(ss.deadline); wait > 0 {
		ss.timer = time.AfterFunc(wait, func() { s.expire(sid) })
		return
	}
	s.dropSessionLocked(ss)
}

// dropSessionLocked ends a session and removes its entries.
func (s *memServer) dropSessionLocked(ss *memSession) {
	ss.timer.Stop()
	delete(s.sessions, ss.id)
	for _, e := range ss.entries {
		s.removeLocked(e)
	}
}

// closeSession is a client's orderly goodbye (the instantExpiry mutant also
// sends it when a client crashes).
func (s *memServer) closeSession(sid int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.sessions[sid]; ss != nil {
		s.dropSessionLocked(ss)
	}
}

// removeLocked takes e out of its lock's queue, grants the next entry and
// wakes the waiters.
func (s *memServer) removeLocked(e *memEntry) {
	delete(s.sessions[e.session].entriesOrNil(), e.id)
	l := s.lockLocked(e.lock)
	for i, q := range l.queue {
		if q == e {
			l.queue = append(l.queue[:i:i], l.queue[i+1:]...)
			break
		}
	}
	s.grantLocked(l)
}

func (ss *memSession) entriesOrNil() map[int64]*memEntry {
	if ss == nil {
		return nil
	}
	return ss.entries
}

// grantLocked grants the head of the queue if it has no token yet, and
// signals a change.
func (s *memServer) grantLocked(l *memLock) {
	if len(l.queue) > 0 && l.queue[0].token == 0 {
		if s.mut != sameToken || s.token == 0 {
			s.token++
		}
		l.queue[0].token = s.token
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// enqueue adds an entry for sid to lock, or with try only if the lock is
// free. It returns the entry and its token (zero if not granted yet).
func (s *memServer) enqueue(sid int64, lock string, try bool) (int64, fence.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.touchLocked(sid)
	if err != nil {
		return 0, 0, err
	}
	l := s.lockLocked(lock)
	if try && len(l.queue) > 0 && s.mut != tryIgnoresHolder {
		return 0, 0, fmt.Errorf("%w: %s", recipe.ErrLocked, lock)
	}
	s.nextID++
	e := &memEntry{id: s.nextID, lock: lock, session: sid}
	ss.entries[e.id] = e
	l.queue = append(l.queue, e)
	if try && s.mut == tryIgnoresHolder {
		s.token++
		e.token = s.token
	}
	s.grantLocked(l)
	return e.id, e.token, nil
}

// status reports an entry's token (zero while it waits) and a channel closed
// at the next change of its lock.
func (s *memServer) status(sid, eid int64) (fence.Token, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.touchLocked(sid)
	if err != nil {
		return 0, nil, err
	}
	e := ss.entries[eid]
	if e == nil {
		return 0, nil, errNoEntry
	}
	return e.token, s.lockLocked(e.lock).changed, nil
}

// remove deletes entry eid of session sid, if it still exists.
func (s *memServer) remove(sid, eid int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.touchLocked(sid)
	if err != nil {
		return err
	}
	e := ss.entries[eid]
	if s.mut == releaseAnyHolder {
		if e == nil {
			return nil
		}
		// The mutant removes the current holder of e's lock, whoever it is.
		if l := s.lockLocked(e.lock); len(l.queue) > 0 {
			e = l.queue[0]
		}
	}
	if e != nil {
		s.removeLocked(e)
	}
	return nil
}

// removeHolder removes the current holder of lock, whoever it is (only the
// releaseAnyHolder mutant uses it).
func (s *memServer) removeHolder(lock string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.lockLocked(lock); len(l.queue) > 0 {
		s.removeLocked(l.queue[0])
	}
}

// count returns how many entries lock has.
func (s *memServer) count(lock string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.locks[lock]; l != nil {
		return len(l.queue)
	}
	return 0
}

// memClient is one process using the service: a recipe.Lock on its own
// session, with a simulated network link.
type memClient struct {
	srv  *memServer
	lock string

	mu        sync.Mutex
	cut       bool
	crashed   bool
	closed    bool
	sid       int64     // current session; 0: open one at the next request
	lastAck   time.Time // send time of the newest answered request
	suspended bool
	watchdog  *time.Timer
	leases    map[*memLease]struct{} // live leases
	orphans   []orphan               // entries to delete once reachable

	quit chan struct{}
	wg   sync.WaitGroup
}

type orphan struct{ sid, eid int64 }

var _ recipe.Lock = (*memClient)(nil)

func newMemClient(srv *memServer, lock string) *memClient {
	c := &memClient{srv: srv, lock: lock, leases: map[*memLease]struct{}{}, quit: make(chan struct{})}
	c.sid = srv.newSession()
	c.lastAck = time.Now()
	c.watchdog = time.AfterFunc(srv.ttl/2, c.checkContact)
	c.wg.Add(1)
	go c.keepAlive()
	return c
}

// call sends one request. A cut-off or crashed client's request does not
// reach the server. An answered request proves contact as of its send time;
// errExpired ends the session (and becomes ErrSessionLost).
func (c *memClient) call(req func(sid int64) error) (int64, error) {
	c.mu.Lock()
	if c.closed || c.crashed {
		c.mu.Unlock()
		return 0, recipe.ErrSessionClosed
	}
	if c.cut {
		c.mu.Unlock()
		return 0, errUnreachable
	}
	if c.sid == 0 {
		c.sid = c.srv.newSession()
	}
	sid := c.sid
	c.mu.Unlock()

	sent := time.Now()
	err := req(sid)
	c.mu.Lock()
	defer c.mu.Unlock()
	if errors.Is(err, errExpired) {
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
// ttl/2, every lease ends (the server may expire the session from ttl on).
func (c *memClient) checkContact() {
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

// loseSessionLocked handles an expired session: its entries are gone.
func (c *memClient) loseSessionLocked(sid int64) {
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

func (c *memClient) endLocked(l *memLease, cause error) {
	delete(c.leases, l)
	l.cancel(cause)
}

// keepAlive pings every ttl/5 and deletes orphaned entries once reachable.
func (c *memClient) keepAlive() {
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
			_, err := c.call(func(sid int64) error {
				if sid != o.sid {
					return nil // its session expired: the entry went with it
				}
				return c.srv.remove(sid, o.eid)
			})
			if errors.Is(err, errUnreachable) {
				c.mu.Lock()
				c.orphans = append(c.orphans, o)
				c.mu.Unlock()
			}
		}
	}
}

// touch is a keep-alive request.
func (s *memServer) touch(sid int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.touchLocked(sid)
	return err
}

// Acquire implements recipe.Lock.
func (c *memClient) Acquire(ctx context.Context) (recipe.Lease, error) { return c.acquire(ctx, false) }

// TryAcquire implements recipe.Lock.
func (c *memClient) TryAcquire(ctx context.Context) (recipe.Lease, error) {
	return c.acquire(ctx, true)
}

const pollInterval = 20 * time.Millisecond

func (c *memClient) acquire(ctx context.Context, try bool) (recipe.Lease, error) {
	if c.srv.mut == ignoresContext && !try {
		ctx = context.Background()
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	var eid int64
	var tok fence.Token
	var sid int64
	for {
		var err error
		sid, err = c.call(func(sid int64) (err error) {
			eid, tok, err = c.srv.enqueue(sid, c.lock, try)
			return err
		})
		if err == nil {
			break
		}
		if !errors.Is(err, errUnreachable) && !errors.Is(err, recipe.ErrSessionLost) {
			return nil, err // ErrLocked, ErrSessionClosed
		}
		if try {
			return nil, err
		}
		select { // not enqueued: nothing to clean up
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(pollInterval):
		}
	}
	for {
		if tok != 0 {
			if l := c.activate(ctx, sid, eid, tok); l != nil {
				return l, nil
			}
			if try {
				c.abandon(sid, eid)
				return nil, recipe.ErrSuspended
			}
		}
		var changed <-chan struct{}
		_, err := c.call(func(sid2 int64) (err error) {
			if sid2 != sid {
				return errOldSession
			}
			tok, changed, err = c.srv.status(sid, eid)
			return err
		})
		switch {
		case errors.Is(err, errOldSession):
			return nil, fmt.Errorf("%w: %w", recipe.ErrSessionLost, err)
		case errors.Is(err, recipe.ErrSessionLost), errors.Is(err, recipe.ErrSessionClosed):
			return nil, err
		case errors.Is(err, errNoEntry):
			return nil, recipe.ErrNodeDeleted
		case err != nil: // unreachable: poll
			changed = nil
		case tok != 0:
			continue
		}
		select {
		case <-changed:
		case <-time.After(pollInterval):
		case <-ctx.Done():
			c.abandon(sid, eid)
			return nil, context.Cause(ctx)
		}
	}
}

// abandon deletes a waiter's entry, or leaves it to the keep-alive loop.
func (c *memClient) abandon(sid, eid int64) {
	if c.srv.mut == leakCancelled {
		return
	}
	_, err := c.call(func(cur int64) error {
		if cur != sid {
			return nil
		}
		return c.srv.remove(sid, eid)
	})
	if errors.Is(err, errUnreachable) {
		c.mu.Lock()
		c.orphans = append(c.orphans, orphan{sid, eid})
		c.mu.Unlock()
	}
}

// activate turns a grant into a lease, unless the client is suspended or the
// session changed meanwhile.
func (c *memClient) activate(ctx context.Context, sid, eid int64, tok fence.Token) *memLease {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.suspended || c.sid != sid || c.closed || c.crashed {
		return nil
	}
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	l := &memLease{c: c, sid: sid, eid: eid, token: tok, ctx: lctx, cancel: cancel}
	c.leases[l] = struct{}{}
	return l
}

// Crash: the process dies; the server is not told.
func (c *memClient) Crash() {
	c.mu.Lock()
	c.crashed = true
	c.watchdog.Stop()
	for l := range c.leases {
		c.endLocked(l, recipe.ErrSessionClosed)
	}
	sid := c.sid
	c.mu.Unlock()
	if c.srv.mut == instantExpiry {
		c.srv.closeSession(sid)
	}
}

// CutOff partitions the client from the server.
func (c *memClient) CutOff() {
	c.mu.Lock()
	c.cut = true
	c.mu.Unlock()
}

// Heal ends CutOff.
func (c *memClient) Heal() {
	c.mu.Lock()
	c.cut = false
	c.mu.Unlock()
}

// close ends the client like Session.Close: an orderly goodbye when the
// server can be reached.
func (c *memClient) close() {
	c.mu.Lock()
	reachable := !c.cut && !c.crashed && !c.closed && c.sid != 0
	c.closed = true
	c.watchdog.Stop()
	for l := range c.leases {
		c.endLocked(l, recipe.ErrSessionClosed)
	}
	sid := c.sid
	c.mu.Unlock()
	close(c.quit)
	c.wg.Wait()
	if reachable {
		c.srv.closeSession(sid)
	}
}

// memLease is one grant.
type memLease struct {
	c        *memClient
	sid, eid int64
	token    fence.Token
	ctx      context.Context
	cancel   context.CancelCauseFunc

	mu        sync.Mutex // serializes Release
	releasing bool
	done      bool
}

var _ recipe.Lease = (*memLease)(nil)

func (l *memLease) Token() fence.Token       { return l.token }
func (l *memLease) Context() context.Context { return l.ctx }

// Release implements recipe.Lease.
func (l *memLease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return nil
	}
	c := l.c
	if c.srv.mut == releaseAnyHolder {
		// The mutant deletes "the lock" without checking whose grant it is.
		l.cancel(recipe.ErrReleased)
		_, err := c.call(func(int64) error { c.srv.removeHolder(c.lock); return nil })
		return err
	}
	c.mu.Lock()
	if _, live := c.leases[l]; live {
		c.endLocked(l, recipe.ErrReleased)
		l.releasing = true
	}
	c.mu.Unlock()
	if !l.releasing {
		return fmt.Errorf("%w: %w", recipe.ErrLeaseLost, context.Cause(l.ctx))
	}
	for {
		_, err := c.call(func(sid int64) error {
			if sid != l.sid {
				return nil // the session expired: the entry went with it
			}
			return c.srv.remove(sid, l.eid)
		})
		if err == nil || errors.Is(err, recipe.ErrSessionLost) {
			l.done = true
			return nil
		}
		if !errors.Is(err, errUnreachable) {
			return err
		}
		select {
		case <-ctx.Done():
			c.mu.Lock()
			c.orphans = append(c.orphans, orphan{l.sid, l.eid})
			c.mu.Unlock()
			return fmt.Errorf("memlock: release: %w (%w)", err, context.Cause(ctx))
		case <-time.After(pollInterval):
		}
	}
}
