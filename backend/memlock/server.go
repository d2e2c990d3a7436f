package memlock

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// DefaultTTL is the session time to live of a Server without WithTTL.
const DefaultTTL = 2 * time.Second

// MinTTL is the shortest TTL WithTTL accepts: keep-alives go every TTL/5.
const MinTTL = 50 * time.Millisecond

// ErrUnreachable is matched by the errors of requests that could not reach
// the Server: the Session is cut off (Session.CutOff), or the Server is
// closed. Acquire waits for the Server instead; TryAcquire and Release
// return it (Release after retrying for the TTL).
var ErrUnreachable = errors.New("memlock: server unreachable")

// Answers of the Server that the Session turns into recipe's sentinels.
var (
	errExpired = errors.New("memlock: session expired") // recipe.ErrSessionLost
	errNoEntry = errors.New("memlock: no such entry")   // recipe.ErrNodeDeleted
	errOldSID  = errors.New("memlock: earlier session") // a request for a session that is no longer the Session's
)

// Option configures NewServer.
type Option func(*Server)

// WithTTL sets the session time to live (default DefaultTTL, at least
// MinTTL). See the package documentation for what it bounds.
func WithTTL(d time.Duration) Option { return func(s *Server) { s.ttl = d } }

// Server is the lock service: sessions with a time to live, a FIFO queue of
// entries per lock name (the first one holds), and one token counter. It is
// safe for concurrent use.
type Server struct {
	ttl time.Duration
	mut mutation

	mu       sync.Mutex
	closed   bool
	nextID   int64
	token    fence.Token
	sessions map[int64]*serverSession
	locks    map[string]*queue
}

// serverSession is the Server's view of one Session's session.
type serverSession struct {
	id       int64
	deadline time.Time
	timer    *time.Timer
	entries  map[int64]*entry
}

// queue is one lock's entries in arrival order.
type queue struct {
	entries []*entry
	changed chan struct{} // closed and replaced at every change of entries
	held    int64         // the entry whose grant was handed out (hold), 0 if none
	unclean time.Time     // when the held entry ended without a clean removal (lock-delay)
}

// entry is one Acquire's place in a queue.
type entry struct {
	id      int64
	lock    string
	session int64
	token   fence.Token // zero until granted
	granted time.Time   // when it was granted
}

// NewServer returns a running Server. Close it when done (it stops its
// expiry timers). Errors: recipe.ErrBadOption for a TTL below MinTTL.
func NewServer(opts ...Option) (*Server, error) {
	s := newServer(DefaultTTL, correct)
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	if s.ttl < MinTTL {
		return nil, fmt.Errorf("%w: memlock TTL %v, want at least %v", recipe.ErrBadOption, s.ttl, MinTTL)
	}
	return s, nil
}

func newServer(ttl time.Duration, mut mutation) *Server {
	return &Server{ttl: ttl, mut: mut, sessions: map[int64]*serverSession{}, locks: map[string]*queue{}}
}

// TTL returns the session time to live.
func (s *Server) TTL() time.Duration { return s.ttl }

// Close stops the Server: its timers stop, and from then on every request
// fails as unreachable (leases end with recipe.ErrSuspended, Acquire waits
// until its context ends). Close the Sessions too. Close is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, ss := range s.sessions {
		ss.timer.Stop()
	}
}

// Entries returns how many entries the lock named name has: its holder and
// its waiters, whichever Session made them. A test can check with it that
// nothing is left behind once every lease is released.
func (s *Server) Entries(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.locks[name]; q != nil {
		return len(q.entries)
	}
	return 0
}

func (s *Server) queueLocked(name string) *queue {
	q := s.locks[name]
	if q == nil {
		q = &queue{changed: make(chan struct{})}
		s.locks[name] = q
	}
	return q
}

// open starts a session.
func (s *Server) open() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrUnreachable
	}
	s.nextID++
	ss := &serverSession{id: s.nextID, deadline: time.Now().Add(s.ttl), entries: map[int64]*entry{}}
	ss.timer = time.AfterFunc(s.ttl, func() { s.expire(ss.id) })
	s.sessions[ss.id] = ss
	return ss.id, nil
}

// touchLocked finds a live session and extends it: every request counts as
// a keep-alive.
func (s *Server) touchLocked(sid int64) (*serverSession, error) {
	if s.closed {
		return nil, ErrUnreachable
	}
	ss := s.sessions[sid]
	if ss == nil {
		return nil, errExpired
	}
	if s.mut != neverExpire {
		ss.deadline = time.Now().Add(s.ttl)
	}
	return ss, nil
}

// expire runs when a session's timer fires: it expires the session if its
// deadline passed, or re-arms the timer.
func (s *Server) expire(sid int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[sid]
	if ss == nil || s.closed || s.mut == neverExpire {
		return
	}
	if wait := time.Until(ss.deadline); wait > 0 {
		ss.timer = time.AfterFunc(wait, func() { s.expire(sid) })
		return
	}
	s.dropLocked(ss, false)
}

// dropLocked ends a session and removes its entries (clean: a lock-delay
// is not started by the held ones).
func (s *Server) dropLocked(ss *serverSession, clean bool) {
	ss.timer.Stop()
	delete(s.sessions, ss.id)
	for _, e := range ss.entries {
		s.removeLocked(e, clean)
	}
}

// close is a Session's orderly goodbye (the instantExpiry mutant also sends
// it when a Session crashes).
func (s *Server) close(sid int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.sessions[sid]; ss != nil {
		s.dropLocked(ss, false) // a lease not released first ended uncleanly
	}
}

// removeLocked takes e out of its queue, grants the next entry and wakes the
// waiters. A held entry removed other than cleanly (by its own Session)
// starts the lock-delay.
func (s *Server) removeLocked(e *entry, clean bool) {
	if ss := s.sessions[e.session]; ss != nil {
		delete(ss.entries, e.id)
	}
	q := s.queueLocked(e.lock)
	if q.held == e.id {
		q.held = 0
		if !clean && s.mut != everyEndClean {
			q.unclean = time.Now()
		}
	} else if clean && s.mut == abandonEndsDelay {
		q.unclean = time.Time{}
	}
	for i, x := range q.entries {
		if x == e {
			q.entries = append(q.entries[:i:i], q.entries[i+1:]...)
			break
		}
	}
	s.grantLocked(q)
}

// grantLocked grants the head of the queue if it has no token yet, and
// signals a change.
func (s *Server) grantLocked(q *queue) {
	if len(q.entries) > 0 && q.entries[0].token == 0 {
		if s.mut != sameToken || s.token == 0 {
			s.token++
		}
		q.entries[0].token, q.entries[0].granted = s.token, time.Now()
	}
	close(q.changed)
	q.changed = make(chan struct{})
}

// touch is a keep-alive.
func (s *Server) touch(sid int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.touchLocked(sid)
	return err
}

// enqueue adds an entry for session sid to lock, or with try only if the
// lock is free (nobody in line, and no lock-delay of length delay being
// served). It returns the entry and its token (zero if not granted
// yet).
func (s *Server) enqueue(sid int64, lock string, try bool, delay time.Duration) (int64, fence.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.touchLocked(sid)
	if err != nil {
		return 0, 0, err
	}
	q := s.queueLocked(lock)
	if try && (len(q.entries) > 0 || q.delayLeft(delay) > 0) && s.mut != tryIgnoresHolder {
		return 0, 0, fmt.Errorf("%w: %s", recipe.ErrLocked, lock)
	}
	s.nextID++
	e := &entry{id: s.nextID, lock: lock, session: sid}
	ss.entries[e.id] = e
	q.entries = append(q.entries, e)
	if try && s.mut == tryIgnoresHolder {
		s.token++
		e.token, e.granted = s.token, time.Now()
	}
	s.grantLocked(q)
	return e.id, e.token, nil
}

// status reports an entry's token (zero while it waits) and a channel closed
// at the next change of its lock's queue.
func (s *Server) status(sid, eid int64) (fence.Token, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.entryLocked(sid, eid)
	if err != nil {
		return 0, nil, err
	}
	return e.token, s.queueLocked(e.lock).changed, nil
}

// entryLocked is entry eid of session sid, touching the session (a
// request keeps it alive); errNoEntry if it is gone.
func (s *Server) entryLocked(sid, eid int64) (*entry, error) {
	ss, err := s.touchLocked(sid)
	if err != nil {
		return nil, err
	}
	if e := ss.entries[eid]; e != nil {
		return e, nil
	}
	return nil, errNoEntry
}

// remove deletes entry eid of session sid, if it still exists: cleanly (a
// Release, a waiter giving up) or not (the entry of a lease lost: the
// lock-delay starts, as after an expiry).
func (s *Server) remove(sid, eid int64, clean bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.touchLocked(sid)
	if err != nil {
		return err
	}
	e := ss.entries[eid]
	if s.mut == releaseAnyHolder && e != nil {
		// The mutant removes the current holder of e's lock, whoever it is.
		if q := s.queueLocked(e.lock); len(q.entries) > 0 {
			e = q.entries[0]
		}
	}
	if e != nil {
		s.removeLocked(e, clean)
	}
	return nil
}

// removeHolder removes the current holder of lock, whoever it is (only the
// releaseAnyHolder mutant uses it).
func (s *Server) removeHolder(lock string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queueLocked(lock); len(q.entries) > 0 {
		s.removeLocked(q.entries[0], true)
	}
}

// holder reads lock's holder: its first entry once granted (it has a token;
// the server's own time of the grant as Since), and a channel closed at the
// next change of its queue.
func (s *Server) holder(lock string) (recipe.HolderState, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queueLocked(lock)
	if len(q.entries) == 0 || q.entries[0].token == 0 {
		return recipe.HolderState{}, q.changed
	}
	e := q.entries[0]
	return recipe.HolderState{Held: true, Holder: recipe.Holder{ID: fmt.Sprintf("memlock session %d", e.session), Token: e.token, Since: e.granted}}, q.changed
}
