package recipe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/notify"
)

// Session owns one go-zookeeper connection (*zk.Conn) and turns its events
// into Curator's connection states (CONNECTED, SUSPENDED, RECONNECTED, LOST),
// and into the ownership signal every lease depends on.
//
// A Session outlives the ZooKeeper sessions it carries: when the server
// expires a session, go-zookeeper silently opens a new one; the Session then
// reports LOST for everything granted under the old session ID and
// RECONNECTED with the new ID. It never misses a transition: it reads
// go-zookeeper's event callback, not its small, lossy event channel, and
// measures server silence itself from the bytes read off the wire, so a
// client that notices a disconnect late (a paused process, case C9) still
// gives up ownership on time.
//
// A chroot suffix in the server list ("host:port/app") is applied to every
// path the recipes use, including the look-up of a create whose reply was
// lost. The raw connection returned by Conn does not know the chroot.
//
// The Session also runs a cleaner: a delete of one of its own znodes that
// could not be completed (connection loss during a release or a cancelled
// acquisition) is retried on every reconnection of the same ZooKeeper
// session, with an identity check (ephemeral owner and czxid) before each
// delete (and given up only as WithMaxPacket says). Close ends the ZooKeeper session, which deletes all of its
// ephemeral znodes at once.
//
// All methods are safe for concurrent use.
type Session struct {
	cfg    config
	log    *slog.Logger
	conn   *zk.Conn
	chroot string

	dials *dialWatch // Connect's attempts (dial.go)

	// Measured off the wire by trackedConn.
	lastReply    atomic.Int64 // unix nanos: send time of the newest request a server answered
	curConn      atomic.Pointer[trackedConn]
	sniffID      atomic.Int64 // session id in the last connect response
	sniffTimeout atomic.Int64 // negotiated timeout in the last connect response (ns)

	mu      sync.Mutex
	state   ConnState
	started bool // first session seen
	closed  bool
	epoch   *epoch
	gen     *generation
	// outages counts transitions to a not-connected state (SUSPENDED,
	// LOST): a lease's unchecked release needs none since its registration.
	outages   uint64
	changed   chan struct{} // closed and replaced on every transition
	listeners map[*notify.Feed[StateChange]]struct{}
	byPath    map[string]*lease // live leases by absolute znode path
	watches   map[watchKey]*nodeWatch
	cleanup   []cleanupItem
	rewatch   []*lease // live leases whose own-node watch was consumed
	logq      []StateChange

	kickJanitor  chan struct{}
	kickWatchdog chan struct{}
	quit         chan struct{}
	wg           sync.WaitGroup

	pool workers // goroutines for requests run on behalf of a waiting caller

	// child watches of pipelined listings that may stand in for a lease's
	// own-node watch (see childSlot), by absolute directory
	childSlots map[string]map[*childSlot]struct{}

	// creates whose reply should carry the new node's Stat (see trackedConn),
	// by the exact path sent
	c2mu sync.Mutex
	c2   map[string]*createSlot
}

// epoch is one ZooKeeper session as seen by this Session.
type epoch struct {
	id     int64
	cause  error           // set (under Session.mu) before ctx is cancelled
	ctx    context.Context // done, with cause, when LOST
	cancel context.CancelCauseFunc
}

func newEpoch(id int64) *epoch {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &epoch{id: id, ctx: ctx, cancel: cancel}
}

// generation is a period of uninterrupted ownership: it ends (revoked) at
// SUSPENDED under the policy, at LOST, and at Close. Leases belong to the
// generation in which they were granted.
type generation struct {
	revoked bool
	leases  map[*lease]struct{}
}

// StateChange is one connection-state transition.
type StateChange struct {
	State     ConnState
	SessionID int64     // the ZooKeeper session ID the transition concerns
	At        time.Time // when the Session observed it
	Cause     error     // for SUSPENDED and LOST: why
}

// Connect opens a Session to the given servers ("host:port" each, or a host
// alone for port DefaultPort, 2181; a comma-separated connect string is
// accepted too, and a chroot suffix such as "host:port/app" applies to every
// path) and waits until the first ZooKeeper session is established.
//
// It returns an error matching ErrBadOption for invalid options (a port
// that is not a number in 1..65535 included), ErrInvalidPath for a
// malformed chroot, and ErrUnreachable when no server established a
// session within the connect timeout (WithConnectTimeout, default 15 s) or
// before ctx ended (the error then also matches ctx's error). The error
// names the servers with their ports and wraps the last attempt's failure
// (a *net.OpError from the dial, matching syscall.ECONNREFUSED when
// nothing listened; a connection closed before the handshake), or says that
// a server accepted the connection but did not answer. It returns as soon
// as ctx ends or the connect timeout passes, also when a server accepted
// the connection and never answers (a hung server, a load balancer in
// front of none): that connection is closed at once, and go-zookeeper's
// own shutdown finishes in the background within about a second. When every address
// of every server refused the connection twice in a row (nothing listens:
// a wrong port, a server that is down), Connect returns then, about a
// second after the first refusal, instead of waiting out the connect
// timeout. The chroot znode itself is not created here; recipes create
// missing parents (as container znodes) when they first need them.
func Connect(ctx context.Context, servers []string, opts ...Option) (*Session, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	hosts, chroot, err := splitServers(servers)
	if err != nil {
		return nil, err
	}
	for _, a := range cfg.auth {
		if n := authFrame(a.scheme, a.auth); n > cfg.maxPacket {
			return nil, errorf("%w: %w: WithAuth(%q) would be a %d-byte request, over the packet limit of %d bytes",
				ErrBadOption, ErrTooLarge, a.scheme, n, cfg.maxPacket)
		}
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%w: empty server list", ErrBadOption)
	}
	s := &Session{
		cfg:          cfg,
		log:          cfg.logger.With("component", "zkrecipes"),
		chroot:       chroot,
		changed:      make(chan struct{}),
		listeners:    make(map[*notify.Feed[StateChange]]struct{}),
		byPath:       make(map[string]*lease),
		watches:      make(map[watchKey]*nodeWatch),
		kickJanitor:  make(chan struct{}, 1),
		kickWatchdog: make(chan struct{}, 1),
		quit:         make(chan struct{}),
		c2:           make(map[string]*createSlot),
		childSlots:   make(map[string]map[*childSlot]struct{}),
	}
	s.pool.quit = s.quit
	dial := cfg.dialer
	if dial == nil {
		dial = net.DialTimeout
	}
	start := time.Now()
	gctx, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	cctx, cancel := context.WithTimeoutCause(gctx, cfg.connectTimeout,
		fmt.Errorf("connect timeout %v passed", cfg.connectTimeout))
	defer cancel()
	hp := zk.NewDNSHostProvider()
	dw := &dialWatch{addrs: hp.Len}
	dw.waiting(giveUp)
	defer dw.waiting(nil)
	s.dials = dw
	conn, _, err := zk.Connect(hosts, cfg.sessionTimeout,
		zk.WithHostProvider(hp),
		zk.WithDialer(func(network, addr string, timeout time.Duration) (net.Conn, error) {
			if dw.isAbandoned() {
				return nil, errAbandoned
			}
			c, err := dial(network, addr, timeout)
			dw.dialed(addr, err)
			if err != nil {
				return nil, err
			}
			return dw.admit(c, func() net.Conn { return newTrackedConn(c, s) })
		}),
		zk.WithEventCallback(s.onEvent),
		zk.WithLogger(zkLogger{s.log}),
		zk.WithLogInfo(false),
		// Nothing over the packet limit is sent (see packet.go): the frame
		// is encoded after the 4-byte length.
		zk.WithMaxConnBufferSize(cfg.maxPacket+4),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err) // e.g. a host name that does not resolve
	}
	s.conn = conn

	if err := s.awaitConnected(cctx); err != nil {
		err = fmt.Errorf("%w: no session with %s after %v: %w", ErrUnreachable, strings.Join(hosts, ","),
			time.Since(start).Round(time.Millisecond), err)
		if last := dw.lastError(); last != nil && !errors.Is(err, last) {
			err = fmt.Errorf("%w (last attempt: %w)", err, last)
		}
		s.abandonConn()
		s.shutdown()
		return nil, err
	}
	for _, a := range cfg.auth {
		if err := s.call(cctx, func() error { return conn.AddAuth(a.scheme, a.auth) }, nil); err != nil {
			s.Close()
			return nil, &OpError{Op: "auth", Path: a.scheme, Err: err}
		}
	}
	s.wg.Add(2)
	go s.watchdog()
	go s.janitor()
	s.log.Info("session connected", "session", fmt.Sprintf("0x%x", s.ID()), "timeout", s.SessionTimeout(), "chroot", ShortPath(chroot), "policy", cfg.policy.String())
	return s, nil
}

// Conn returns the underlying go-zookeeper connection, for operations the
// recipes don't cover. Paths given to it are not adjusted for the chroot.
// Don't Close it: close the Session.
//
// The other way round is not offered: a Session cannot be built on a
// *zk.Conn the caller already has. It must see every state transition,
// which go-zookeeper delivers reliably only to the event callback given to
// zk.Connect (its event channel drops events when nobody reads in time),
// and it must read the wire through the dialer given there (the last
// server reply that ownership deadlines count from, the create2 replies
// that carry a grant's token). Connect a Session beside your own
// connection; one more connection per process costs the ensemble little.
func (s *Session) Conn() *zk.Conn { return s.conn }

// ID returns the current ZooKeeper session ID (0 before the first session).
func (s *Session) ID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch == nil {
		return 0
	}
	return s.epoch.id
}

// State returns the current connection state. After Close it is StateLost.
func (s *Session) State() ConnState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Done returns a channel closed when the ZooKeeper session that is current at
// the time of the call is LOST (expired, presumed expired, or closed). After a
// new session is established, Done returns a new channel.
func (s *Session) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch.ctx.Done()
}

// Logger returns the Session's logger (WithLogger, which states the
// default: WARN and above to slog.Default()'s handler), for recipes built
// on the Session to log through.
func (s *Session) Logger() *slog.Logger { return s.cfg.logger }

// Chroot returns the chroot parsed from the server list ("" if none).
func (s *Session) Chroot() string { return s.chroot }

// SessionTimeout returns the session timeout negotiated with the server (the
// requested one until a server has answered).
func (s *Session) SessionTimeout() time.Duration {
	if t := s.sniffTimeout.Load(); t > 0 {
		return time.Duration(t)
	}
	return s.cfg.sessionTimeout
}

// LastServerReply returns the send time of the newest request (pings
// included) that a server has answered: a lower bound for when the server
// last heard from this client, so the server cannot expire the session
// before LastServerReply + the session timeout. Ownership deadlines are
// counted from it, never from when a reply was read (after a pause, old
// replies read late would otherwise look fresh).
func (s *Session) LastServerReply() time.Time { return time.Unix(0, s.lastReply.Load()) }

// Close ends the ZooKeeper session, ends every live lease with cause
// ErrSessionClosed, stops the Session's goroutines (its watchdog, cleaner,
// listeners and request workers) and waits for them (up to about 2 s when
// no server answers). When a server receives the close, it
// deletes all the session's ephemeral znodes at once; when none can be
// reached, they stay until the server expires the session (one session
// timeout). It is idempotent and returns nil; operations after Close return
// ErrSessionClosed.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	wasLost := s.state == StateLost
	var id int64
	if s.epoch != nil {
		id = s.epoch.id
	}
	s.loseEpochLocked(ErrSessionClosed)
	if m := s.cfg.metrics; m != nil && wasLost {
		m.SessionState(StateLost, StateLost, ErrSessionClosed) // the close of a lost session is no transition, but Metrics counts it
	}
	for _, it := range s.cleanup {
		it.finish() // a closed session's ephemerals go with it
	}
	s.cleanup = nil
	s.unlock()
	s.conn.Close()
	s.shutdown()
	s.log.Info("session closed", "session", fmt.Sprintf("0x%x", id))
	return nil
}

// abandonConn ends the connection of a Connect that got no session,
// without making the caller wait. go-zookeeper's Close waits up to a second
// for the answer to its close request, which a server that accepted the
// connection but never answers (a hung server, a load balancer) never
// sends; and its connection goroutine would stay blocked reading the
// handshake reply for ten times the receive timeout. So no new dial is
// made, the connection open now is closed (which ends that read at once),
// and go-zookeeper's Close runs on a goroutine of its own: it stops the
// connection goroutine at once and returns itself within that second.
func (s *Session) abandonConn() {
	s.dials.abandon()
	if c := s.curConn.Load(); c != nil {
		c.Close()
	}
	go s.conn.Close()
}

func (s *Session) shutdown() {
	s.mu.Lock()
	s.closed = true
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	if s.epoch != nil {
		s.loseEpochLocked(ErrSessionClosed)
	}
	s.unlock()
	s.wg.Wait()
	s.pool.stop() // after conn.Close: every request a worker runs returns at once
}

// abs turns a recipe path into the server path (chroot prepended).
func (s *Session) abs(p string) string { return s.chroot + p }

// ---- state machine (runs inside go-zookeeper's event callback: never blocks) ----

func (s *Session) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		s.mu.Lock()
		if ev.Type == zk.EventNodeDeleted && s.byPath[ev.Path] != nil {
			// A process paused past its session timeout reads, when it
			// resumes, the notifications that waited in its socket: the
			// deletion of its own node by the session's expiry among them.
			// Apply the ownership deadlines first, so that such a loss is
			// reported as the suspension or session loss it is, not as a
			// deletion by someone else.
			s.checkDeadlinesLocked(time.Now())
		}
		s.fireEventLocked(ev)
		s.fireChildSlotsLocked(ev.Path)
		if l := s.byPath[ev.Path]; l != nil {
			switch ev.Type {
			case zk.EventNodeDeleted:
				s.revokeLeaseLocked(l, ErrNodeDeleted, false)
			case zk.EventNodeDataChanged:
				// Someone wrote to our lock node, consuming its watch: the
				// cleaner sets a new one (not here: this must not block).
				// A lease not yet active reads its node after this anyway,
				// unless its Stat came with the create (early).
				if l.active || l.early {
					s.rewatch = append(s.rewatch, l)
					s.kick(s.kickJanitor)
				}
			}
		}
		s.unlock()
		return
	}
	s.mu.Lock()
	defer s.unlock()
	if s.closed {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		s.onSessionLocked(s.sniffID.Load())
	case zk.StateDisconnected:
		if s.state.IsConnected() {
			s.suspendLocked(fmt.Errorf("%w: disconnected from %s", ErrSuspended, ev.Server))
		}
	case zk.StateExpired:
		if s.epoch != nil {
			s.loseEpochLocked(fmt.Errorf("%w: expired by the server", ErrSessionLost))
		}
	}
}

func (s *Session) onSessionLocked(id int64) {
	switch {
	case !s.started:
		s.started = true
		s.epoch = newEpoch(id)
		s.gen = &generation{leases: make(map[*lease]struct{})}
		s.setStateLocked(StateConnected, nil)
	case id == s.epoch.id && s.epoch.cause == nil:
		if s.state == StateSuspended {
			if s.gen.revoked {
				s.gen = &generation{leases: make(map[*lease]struct{})}
			}
			s.setStateLocked(StateReconnected, nil)
		}
	default:
		if s.epoch.cause == nil {
			s.loseEpochLocked(fmt.Errorf("%w: server gave a new session 0x%x", ErrSessionLost, id))
		}
		s.epoch = newEpoch(id)
		s.gen = &generation{leases: make(map[*lease]struct{})}
		// Cleanup entries of other sessions are moot: their ephemerals died.
		kept := s.cleanup[:0]
		for _, c := range s.cleanup {
			if c.owner == id {
				kept = append(kept, c)
			} else {
				c.finish()
			}
		}
		s.cleanup = kept
		s.setStateLocked(StateReconnected, nil)
	}
	s.kick(s.kickJanitor)
	s.kick(s.kickWatchdog)
}

func (s *Session) suspendLocked(cause error) {
	if s.state.IsConnected() {
		s.setStateLocked(StateSuspended, cause)
	}
	if !s.cfg.policy.tolerate {
		s.revokeGenLocked(cause)
	}
	s.kick(s.kickWatchdog)
}

// loseEpochLocked ends the current ZooKeeper session's ownership for good.
func (s *Session) loseEpochLocked(cause error) {
	if s.epoch == nil || s.epoch.cause != nil {
		return
	}
	s.epoch.cause = cause
	s.epoch.cancel(cause)
	s.revokeGenLocked(cause)
	// Deletes waiting for this session are moot now (its nodes went with
	// it): whoever waits for them (Queue.Drain) stops waiting. The items
	// stay, in case a presumed-lost session comes back.
	for i := range s.cleanup {
		if s.cleanup[i].owner == s.epoch.id {
			s.cleanup[i].finish()
			s.cleanup[i].done = nil
		}
	}
	s.setStateLocked(StateLost, cause)
}

func (s *Session) revokeGenLocked(cause error) {
	if s.gen == nil || s.gen.revoked {
		return
	}
	s.gen.revoked = true
	suspended := errors.Is(cause, ErrSuspended)
	for l := range s.gen.leases {
		// A lease's znode may still exist: delete it on reconnection (so a
		// lock nobody holds is freed), unless it belongs to a Ticket that
		// keeps its place across a suspension (leader latch).
		s.revokeLeaseLocked(l, cause, !(l.keep && suspended))
	}
}

// revokeLeaseLocked ends one lease. If its znode may still exist (suspension,
// presumed expiry) it is queued for deletion on reconnection of the same
// ZooKeeper session, so that a lock nobody holds any more is freed.
func (s *Session) revokeLeaseLocked(l *lease, cause error, queueDelete bool) {
	if s.byPath[l.path] == l {
		delete(s.byPath, l.path)
	}
	s.dropChildSlotLocked(l.child)
	delete(l.gen.leases, l)
	if s.cfg.metrics != nil && l.active && l.ctx.Err() == nil {
		s.reportLeaseLost(l, cause)
	}
	l.cancel(cause)
	if queueDelete && !s.closed {
		s.queueCleanupLocked(cleanupItem{path: l.path, czxid: l.czxid, owner: l.owner})
	}
}

func (s *Session) setStateLocked(st ConnState, cause error) {
	if s.state == st {
		return
	}
	if m := s.cfg.metrics; m != nil {
		m.SessionState(s.state, st, cause)
	}
	s.state = st
	if !st.IsConnected() {
		s.outages++
	}
	close(s.changed)
	s.changed = make(chan struct{})
	var id int64
	if s.epoch != nil {
		id = s.epoch.id
	}
	ch := StateChange{State: st, SessionID: id, At: time.Now(), Cause: cause}
	for l := range s.listeners {
		l.Push(ch)
	}
	s.logq = append(s.logq, ch) // logged by unlock, outside the mutex
}

// unlock releases s.mu and then logs the transitions recorded meanwhile, so
// that a slow (or re-entrant) log handler never runs under the mutex nor
// stalls go-zookeeper's event dispatch for longer than it takes to log.
// The first CONNECTED and the LOST of Close are not logged as transitions:
// Connect logs "session connected", Close "session closed".
func (s *Session) unlock() {
	q, closed := s.logq, s.closed
	s.logq = nil
	s.mu.Unlock()
	for _, ch := range q {
		if ch.State == StateConnected || (ch.State == StateLost && errors.Is(ch.Cause, ErrSessionClosed)) {
			continue
		}
		lvl := slog.LevelInfo
		if (ch.State == StateSuspended || ch.State == StateLost) && !closed {
			lvl = slog.LevelWarn
		}
		s.log.Log(context.Background(), lvl, "connection state", "state", ch.State.String(),
			"session", fmt.Sprintf("0x%x", ch.SessionID), "cause", ch.Cause)
	}
}

func (s *Session) kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// ---- watchdog: ownership deadlines counted from the last server reply ----

func (s *Session) watchdog() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := s.checkDeadlines(time.Now())
		timer.Reset(next)
		select {
		case <-s.quit:
			return
		case <-timer.C:
		case <-s.kickWatchdog:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// checkDeadlines applies the suspension policy and the client-side expiry,
// and returns how long to sleep before the next check.
func (s *Session) checkDeadlines(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.unlock()
	return s.checkDeadlinesLocked(now)
}

// checkDeadlinesLocked is checkDeadlines under s.mu.
func (s *Session) checkDeadlinesLocked(now time.Time) time.Duration {
	if s.closed || s.epoch == nil {
		return time.Hour
	}
	timeout := s.SessionTimeout()
	revokeAfter := s.cfg.policy.revokeAfter(timeout)
	last := time.Unix(0, s.lastReply.Load())
	silent := now.Sub(last)

	// Deadlines count from the send time of the newest request a server
	// answered: the server heard from us no earlier than that, so it can't
	// expire the session before last + timeout.
	dropConn := false
	if s.epoch.cause == nil && silent >= revokeAfter && !(s.state == StateSuspended && s.gen.revoked) {
		cause := fmt.Errorf("%w: no server reply for %v (policy %s, session timeout %v)", ErrSuspended, silent.Round(time.Millisecond), s.cfg.policy, timeout)
		s.suspendLocked(cause)
		s.revokeGenLocked(cause)
		dropConn = true
	}
	if s.epoch.cause == nil && silent >= timeout {
		s.loseEpochLocked(fmt.Errorf("%w: no server reply within the session timeout %v; presumed expired", ErrSessionLost, timeout))
		dropConn = true
	}
	if dropConn {
		// Make go-zookeeper reconnect (and so re-validate the session) even
		// if its own read deadline didn't fire, e.g. after this process was
		// paused, or with a dialer whose connections ignore deadlines: the
		// handshake tells whether the session survived.
		if c := s.curConn.Load(); c != nil {
			c.Close()
		}
	}
	switch {
	case s.epoch.cause != nil:
		return time.Hour // a new session will kick us
	case silent < revokeAfter:
		return revokeAfter - silent
	case silent < timeout:
		return timeout - silent
	}
	return time.Hour
}

// ---- waiting for the connection ----

// awaitConnected blocks until the state is CONNECTED or RECONNECTED.
func (s *Session) awaitConnected(ctx context.Context) error {
	for {
		s.mu.Lock()
		st, ch, closed := s.state, s.changed, s.closed
		s.mu.Unlock()
		if closed {
			return ErrSessionClosed
		}
		if st.IsConnected() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-s.quit:
			return ErrSessionClosed
		}
	}
}

// current returns the live epoch.
func (s *Session) current() (*epoch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrSessionClosed
	}
	return s.epoch, nil
}

// retry runs op until it succeeds, fails with a non-connection error, ctx
// ends, or the session is closed. Between attempts it waits for the
// connection and backs off per the retry policy. size bounds the requests
// op sends: over DefaultMaxPacket, op is not tried again once they lost
// their connection right after being sent maxLostSends times in a row (see
// packet.go); it then fails with an error matching ErrTooLarge.
func (s *Session) retry(ctx context.Context, size int, op func() error) error {
	err, _ := s.retryLate(ctx, &lostSends{size: size}, op, nil)
	return err
}

// retryLate is retry where late, if not nil, is called with the outcome of
// an attempt that completed after the caller stopped waiting for it (ctx
// ended or the session closed while the request was in flight), so that an
// effect nobody is waiting for any more (a created node) can be undone.
// abandoned reports that this happened: late will be called (once) after
// the in-flight request completes. sends carries the size of op's requests
// and counts its connection losses (see packet.go).
func (s *Session) retryLate(ctx context.Context, sends *lostSends, op func() error, late func(error)) (_ error, abandoned bool) {
	var b backoff.BackOff
	for first := true; ; first = false {
		// The first attempt is made even on a done ctx: cleanup deletes rely
		// on it being sent.
		if err := ctx.Err(); err != nil && !first {
			return context.Cause(ctx), false
		}
		err, abandoned := s.callLate(ctx, op, late)
		if abandoned {
			return err, true
		}
		if err == nil || !isConnErr(err) {
			if isClosing(err) {
				return ErrSessionClosed, false
			}
			return err, false
		}
		if err := sends.note(err); err != nil {
			return err, false
		}
		if b == nil {
			b = s.cfg.newBackOff()
		}
		d := b.NextBackOff()
		if d == backoff.Stop {
			return err, false
		}
		if werr := s.awaitConnected(ctx); werr != nil {
			return werr, false
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx), false
		case <-s.quit:
			t.Stop()
			return ErrSessionClosed, false
		}
	}
}

// ---- listeners ----

// Listen returns a channel that receives every connection-state transition
// from now on, in order, until ctx ends or the Session is closed (then the
// channel is closed). Delivery never blocks go-zookeeper's event dispatch: a
// slow reader only delays its own channel (transitions queue up for it).
func (s *Session) Listen(ctx context.Context) <-chan StateChange {
	f := notify.NewFeed[StateChange]()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		f.Close()
		return f.C()
	}
	s.listeners[f] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.listeners, f)
			s.mu.Unlock()
		}()
		f.Run(ctx, s.quit)
	}()
	return f.C()
}

type zkLogger struct{ l *slog.Logger }

// Printf logs a line of go-zookeeper's at debug level, except its failures
// to re-register watches or credentials on a new connection (watches, and
// with them the wakeups of waiters, can be lost: see WithMaxPacket), at
// error level.
func (z zkLogger) Printf(format string, args ...any) {
	lvl := slog.LevelDebug
	if strings.HasPrefix(format, "Failed to set previous watches") || strings.HasPrefix(format, "error in resending auth creds") {
		lvl = slog.LevelError
	}
	z.l.Log(context.Background(), lvl, fmt.Sprintf(format, args...), "source", "go-zookeeper")
}

// ---- lease registry ----

// prepareLease registers a lease for nodePath before its node is read, so a
// deletion event that arrives between the read and the activation is not
// missed. It returns the generation current now.
func (s *Session) prepareLease(ctx context.Context, nodePath string, owner int64) (*lease, *generation) {
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	l := &lease{s: s, path: nodePath, owner: owner, ctx: lctx, cancel: cancel}
	s.mu.Lock()
	defer s.mu.Unlock()
	l.gen = s.gen
	l.outages = s.outages
	s.byPath[nodePath] = l
	return l, s.gen
}

// registerEarly registers l, filled in from its node's create2 Stat (with
// slot, the child watch of its pipelined listing: l.child). Its own-node
// watch is set at the grant (see Queue.wait). The lease is registered
// before any watch request on its node is sent, so no event is missed.
func (s *Session) registerEarly(l *lease, slot *childSlot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.gen = s.gen
	l.outages = s.outages
	l.early = true
	s.byPath[l.path] = l
	if slot != nil {
		l.child = slot
		slot.l = l
	}
}

// childSlot is the child watch of an Acquire's pipelined listing (getChildren
// with watch on the queue directory, sent right behind the create), which
// stands in for the lease's own-node watch when that listing grants:
//   - the watch is registered by the server when it answers the listing, the
//     very state the grant was decided on (it shows our node), so any later
//     change of the directory's children, the deletion of our node by
//     anyone included, fires it: there is no moment between the decision
//     and the watch in which a deletion could go unseen;
//   - it is registered (Session.childSlots) before the listing is sent, so
//     no event is missed, and any event on the directory (children changed,
//     the directory deleted, the watch dropped) marks it fired: the
//     one-shot watch is then spent, whichever listing set it;
//   - a slot fired before the grant is not used (the grant reads the node,
//     Queue.grant). One that fires after the grant was decided (granting)
//     makes the lease read its node with a data watch (armOwn): NoNode, or
//     another czxid, ends the lease (ErrNodeDeleted). So a deletion of our
//     node ends the lease one read after its event (the next waiter, woken
//     by the same deletion, must also read before it is granted), and a
//     change that is not ours (a waiter joining) costs that one read.
//
// It saves the uncontended Acquire its own-node read: create2 → getChildren
// with watch, then the release's delete, whose event the watch delivers.
// A child watch nobody uses (a listing that did not grant) is certain to
// fire too: at the next change of the directory, at the latest when the
// caller's own node goes (rule 6 of the fault cases); it is then one event.
// A slot lives no longer than its early lease (dropped when the lease
// waits, ends or is given up), so slots are bounded by the Acquires in
// flight.
type childSlot struct {
	dir string // absolute

	// under Session.mu
	fired    bool
	granting bool   // the grant was decided on the listing that set the watch
	l        *lease // the early lease it covers
}

func (s *Session) addChildSlot(dir string) *childSlot {
	slot := &childSlot{dir: dir}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addChildSlotLocked(slot)
	return slot
}

// addChildSlotFor registers a child slot on dir for the early lease l,
// replacing l's previous one.
func (s *Session) addChildSlotFor(dir string, l *lease) *childSlot {
	slot := &childSlot{dir: dir, l: l}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropChildSlotLocked(l.child)
	l.child = slot
	s.addChildSlotLocked(slot)
	return slot
}

func (s *Session) addChildSlotLocked(slot *childSlot) {
	m := s.childSlots[slot.dir]
	if m == nil {
		m = make(map[*childSlot]struct{})
		s.childSlots[slot.dir] = m
	}
	m[slot] = struct{}{}
}

func (s *Session) dropChildSlot(slot *childSlot) {
	if slot == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropChildSlotLocked(slot)
}

func (s *Session) dropChildSlotLocked(slot *childSlot) {
	if slot == nil {
		return
	}
	if m := s.childSlots[slot.dir]; m != nil {
		delete(m, slot)
		if len(m) == 0 {
			delete(s.childSlots, slot.dir)
		}
	}
}

// fireChildSlotsLocked spends every child slot on path (a watch event
// there): a slot whose lease was granted on it reads its node now.
func (s *Session) fireChildSlotsLocked(p string) {
	m := s.childSlots[p]
	if m == nil {
		return
	}
	delete(s.childSlots, p)
	for slot := range m {
		slot.fired = true
		if slot.granting {
			s.armOwnLocked(slot.l)
		}
	}
}

// useChildSlot reports whether the lease may be granted on its child watch:
// the watch has not fired. From then on a firing makes the lease read its
// node.
func (s *Session) useChildSlot(slot *childSlot) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slot.fired {
		return false
	}
	slot.granting = true
	return true
}

// armOwnLocked starts armOwn for l once (never blocking: the event
// callback calls it).
func (s *Session) armOwnLocked(l *lease) {
	if l == nil || l.arming || l.ctx.Err() != nil || s.closed {
		return
	}
	l.arming = true
	s.pool.run(func() { s.armOwn(l) })
}

// armOwn sets the data watch on an early lease's own node. NoNode, or a
// node that is not the one created, ends the lease (ErrNodeDeleted); a
// connection error leaves the watch to the cleaner (rewatchLeases), which
// sets it on reconnection.
func (s *Session) armOwn(l *lease) {
	_, st, _, err := s.conn.GetW(l.path)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case l.ctx.Err() != nil:
	case errors.Is(err, zk.ErrNoNode):
		s.revokeLeaseLocked(l, ErrNodeDeleted, false)
	case err != nil:
		if !s.closed {
			s.rewatch = append(s.rewatch, l)
			s.kick(s.kickJanitor)
		}
	case st.Czxid != l.czxid || st.EphemeralOwner != l.owner:
		s.revokeLeaseLocked(l, ErrNodeDeleted, false)
	default:
		l.version = st.Version
	}
}

// activateLease makes a prepared lease live if nothing ended ownership since
// prepareLease; otherwise it drops it and returns the reason.
func (s *Session) activateLease(l *lease, ep *epoch, gen *generation, czxid int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cause error
	switch {
	case l.ctx.Err() != nil:
		cause = context.Cause(l.ctx)
	case s.closed:
		cause = ErrSessionClosed
	case ep.cause != nil:
		cause = ep.cause
	case s.epoch != ep || s.gen != gen || gen.revoked || !s.state.IsConnected():
		cause = ErrSuspended
	}
	if cause != nil {
		if s.byPath[l.path] == l {
			delete(s.byPath, l.path)
		}
		s.dropChildSlotLocked(l.child)
		l.cancel(cause)
		return cause
	}
	l.czxid = czxid
	gen.leases[l] = struct{}{}
	l.active = true
	return nil
}

// dropLease forgets a prepared lease that was never activated.
func (s *Session) dropLease(l *lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byPath[l.path] == l {
		delete(s.byPath, l.path)
	}
	s.dropChildSlotLocked(l.child)
	l.cancel(ErrReleased)
}

// noteReply advances lastReply to sentAt (never backwards).
func (s *Session) noteReply(sentAt int64) {
	for {
		old := s.lastReply.Load()
		if sentAt <= old || s.lastReply.CompareAndSwap(old, sentAt) {
			return
		}
	}
}

// call runs one attempt of a request. go-zookeeper's calls are synchronous
// and know no context: a request to a server that stopped answering waits
// until the client gives up on the connection (2/3 of the session timeout,
// and up to ten times that while reconnecting to a frozen server). So unless
// ctx can never end, the request runs on a goroutine of its own and the
// caller stops waiting when ctx ends (or the session is closed); the request
// still completes in the background, and late (if set) gets its outcome.
func (s *Session) call(ctx context.Context, op func() error, late func(error)) error {
	err, _ := s.callLate(ctx, op, late)
	return err
}

// callLate is call that also reports whether the caller stopped waiting
// while the request was in flight (then late, if set, will be called).
//
// The request runs on one of the Session's workers (no goroutine and no
// channel is made per request: the handshake below is pooled).
func (s *Session) callLate(ctx context.Context, op func() error, late func(error)) (_ error, abandoned bool) {
	if ctx.Done() == nil {
		return op(), false
	}
	c := callPool.Get().(*pendingCall)
	c.state.Store(0)
	s.pool.run(func() {
		err := op()
		if c.state.CompareAndSwap(0, 1) {
			c.done <- err
			return
		}
		if late != nil {
			late(err)
		}
		callPool.Put(c) // the caller has left: c is ours
	})
	var cause error
	select {
	case err := <-c.done:
		callPool.Put(c)
		return err, false
	case <-ctx.Done():
		cause = context.Cause(ctx)
	case <-s.quit:
		cause = ErrSessionClosed
	}
	if c.state.CompareAndSwap(0, 2) {
		return cause, true
	}
	err := <-c.done
	callPool.Put(c)
	return err, false
}

// pendingCall is the hand-off between a caller of callLate and the worker
// running its request.
type pendingCall struct {
	state atomic.Int32 // 0: waited for, 1: answered, 2: abandoned
	done  chan error   // capacity 1
}

var callPool = sync.Pool{New: func() any { return &pendingCall{done: make(chan error, 1)} }}

func (s *Session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
