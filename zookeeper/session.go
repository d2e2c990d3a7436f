package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/internal/life"
	"github.com/zkrecipes/zkrecipes/internal/notify"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Session is one go-zookeeper connection and the ZooKeeper sessions it
// carries one after another, reported as Curator's connection states (State,
// Listen): when the server expires a session, go-zookeeper opens a new one,
// and everything granted under the old one is LOST. It reads every
// transition from go-zookeeper's event callback and measures server silence
// itself, so ownership ends on time even when a disconnect is noticed late
// (C9; docs/zookeeper-client.md#connection-states-and-the-ownership-deadline).
// A chroot applies to recipe paths, not Conn's; a failed delete of its own
// znode is retried on reconnection of the same session after an identity
// check; Close ends the session and its ephemeral znodes. Concurrency-safe.
type Session struct {
	sessionDoor // what internal/zkside lends the module's packages (side.go)
	cfg         config
	log         *slog.Logger
	conn        *zk.Conn
	chroot      string
	dials       *dialWatch  // Connect's attempts (dial.go)
	hosts       *namedHosts // with TLS: the host names of the addresses (tls.go)
	wire        wireState   // read off the wire by zkwire (wire.go)

	// The parts, which own their operations. mu is the one lock of the
	// first four: a method is named ...Locked exactly when its caller must
	// hold mu; every other method takes it itself if it needs it.
	// go-zookeeper's event callback takes it, so nothing blocks while
	// holding it (requests are made outside).
	mu      *sessionLock  // and closed, and what is logged after it (log.go)
	conns   connState     // connection states, epochs, ownership deadlines (state.go, deadline.go)
	leases  leaseRegistry // generations, leases, child slots, own-node watches (registry.go, slots.go)
	watches watchRegistry // watches shared by waiters (watch.go)
	cleaner cleaner       // owned deletes left to retry, janitor (cleanup.go, delete.go)
	req     requests      // requests on behalf of a caller (call.go)
	pool    workers       // the goroutines that run them (pool.go)
	limit   packetLimit   // the sizes requests are checked against (packet.go)
	limits  limitWarnings // directories warned about at the sequence limit (limit.go)
	dirs    dirTrust      // directories that passed the ACL rule (diracl.go)

	// life tracks the Session's goroutines (the janitor, listeners,
	// observers), which Close waits for; quit is its context's Done, closed
	// once Close has closed the connection. mu.closed is set before, as
	// Close begins, so that the parts stop under the lock they run under.
	life *life.Group
	quit <-chan struct{}
}

// Connect opens a Session to servers ("host:port" each, a host alone for
// port 2181, or comma-separated connect strings; a chroot suffix such as
// "host:port/app" applies to every recipe path) and waits until the first
// ZooKeeper session is established: at most the connect timeout
// (WithConnectTimeout, default 15 s) or until ctx ends. It creates no znode.
// Errors: recipe.ErrBadOption for invalid options (a port outside 1..65535
// included); recipe.ErrInvalidPath for a malformed chroot; ctx's cause when
// ctx was cancelled; else recipe.ErrUnreachable (also matching
// context.DeadlineExceeded at ctx's deadline), naming the servers and
// wrapping the last failure (docs/backends/zookeeper.md#set-up).
func Connect(ctx context.Context, servers []string, opts ...Option) (*Session, error) {
	cfg, hosts, chroot, err := connectConfig(servers, opts)
	if err != nil {
		return nil, err
	}
	s := newSession(cfg, chroot)
	start := time.Now()
	gctx, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	cctx, cancel := context.WithTimeoutCause(gctx, cfg.connectTimeout,
		fmt.Errorf("connect timeout %v passed", cfg.connectTimeout))
	defer cancel()
	hp := s.hostProvider()
	s.dials = &dialWatch{addrs: hp.Len, tls: cfg.tls}
	s.dials.waiting(giveUp)
	defer s.dials.waiting(nil)
	conn, _, err := zk.Connect(hosts, cfg.sessionTimeout,
		zk.WithHostProvider(hp),
		zk.WithDialer(s.dialer()),
		zk.WithEventCallback(s.onEvent),
		zk.WithLogger(zkLogger{s.log}),
		zk.WithLogInfo(false),
		// Nothing over the packet limit is sent (see packet.go): the frame
		// is encoded after the 4-byte length.
		zk.WithMaxConnBufferSize(cfg.maxPacket+4),
	)
	if err != nil {
		return nil, &recipe.OpError{Op: "connect", Err: fmt.Errorf("%w: %w", recipe.ErrUnreachable, err)} // e.g. a host name that does not resolve
	}
	s.setConn(conn)
	if err := s.conns.awaitConnected(cctx); err != nil {
		err = s.unreachable(ctx, hosts, time.Since(start), err)
		s.abandonConn()
		s.shutdown()
		return nil, err
	}
	if err := s.addAuth(cctx); err != nil {
		s.Close()
		return nil, err
	}
	s.life.Go(s.cleaner.run)
	s.log.Info("session connected", "session", fmt.Sprintf("0x%x", s.ID()), "timeout", s.SessionTimeout(), "chroot", shortpath.Of(chroot), "policy", cfg.policy.describe())
	warnSessionTimeout(s.log, cfg.sessionTimeout, s.SessionTimeout(), cfg.policy)
	return s, nil
}

// connectConfig checks Connect's options and server list.
func connectConfig(servers []string, opts []Option) (cfg config, hosts []string, chroot string, err error) {
	cfg, err = buildConfig(opts)
	if err != nil {
		return cfg, nil, "", err
	}
	hosts, chroot, err = splitServers(servers)
	if err != nil {
		return cfg, nil, "", err
	}
	for _, a := range cfg.auth {
		if n := zkwire.AuthFrame(a.scheme, a.auth); n > cfg.maxPacket {
			return cfg, nil, "", errorf("%w: %w: WithAuth(%q) would be a %d-byte request, over the packet limit of %d bytes",
				recipe.ErrBadOption, recipe.ErrTooLarge, a.scheme, n, cfg.maxPacket)
		}
	}
	if len(hosts) == 0 {
		return cfg, nil, "", fmt.Errorf("%w: empty server list", recipe.ErrBadOption)
	}
	if err := checkACL(cfg.acl, cfg.auth); err != nil {
		return cfg, nil, "", err
	}
	return cfg, hosts, chroot, nil
}

// newSession makes a Session and wires its parts; the connection is set
// by setConn.
func newSession(cfg config, chroot string) *Session {
	s := &Session{cfg: cfg, log: cfg.logger.With("component", "zkrecipes"), chroot: chroot, life: life.New()}
	s.wire.hub.chroot, s.wire.hub.log, s.wire.hub.lost = chroot, s.log, s.onEvent
	s.sessionDoor = zkside.NewSessionDoor((*sessionSide)(s))
	s.quit = s.life.Context().Done()
	s.mu = newSessionLock(s.log)
	s.wire.requested = cfg.sessionTimeout
	s.limit = packetLimit{max: cfg.maxPacket, acl: cfg.acl}
	s.pool.quit = s.quit
	s.req = requests{pool: &s.pool, conns: &s.conns, quit: s.quit, life: s.life, newBackOff: cfg.newBackOff}
	s.conns = connState{mu: s.mu, leases: &s.leases, cleaner: &s.cleaner, wire: &s.wire,
		policy: cfg.policy, metrics: cfg.metrics, quit: s.quit}
	s.leases = leaseRegistry{mu: s.mu, conns: &s.conns, cleaner: &s.cleaner, pool: &s.pool, s: s, chroot: chroot,
		byPath: make(map[string]*lease), childSlots: make(map[string]map[*childSlot]struct{})}
	s.watches = watchRegistry{mu: s.mu, req: &s.req, s: s, byKey: make(map[watchKey]*nodeWatch)}
	s.cleaner = cleaner{mu: s.mu, conns: &s.conns, leases: &s.leases, req: &s.req, wire: &s.wire, s: s, log: s.log,
		cleanupTimeout: cfg.cleanupTimeout, quit: s.quit, kick: make(chan struct{}, 1)}
	return s
}

// setConn gives the parts that send requests the connection.
func (s *Session) setConn(conn *zk.Conn) {
	s.conn, s.watches.conn = conn, conn
}

// dialer is go-zookeeper's dialer: every connection goes through the dial
// watch and zkwire.
func (s *Session) dialer() zk.Dialer {
	dial := s.cfg.dialer
	if dial == nil {
		dial = net.DialTimeout
	}
	dw := s.dials
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		if dw.isAbandoned() {
			return nil, errAbandoned
		}
		if err := dw.knownWrong(addr); err != nil {
			dw.dialed(addr, err) // another server: go-zookeeper moves on (wrong.go)
			return nil, err
		}
		c, err := dial(network, addr, timeout)
		if err == nil && s.cfg.tls != nil {
			c, err = s.handshake(c, addr, timeout)
		}
		dw.dialed(addr, err)
		if err != nil {
			return nil, err
		}
		s.watchFirst(addr)
		return dw.admit(c, func() net.Conn { return s.wire.track(c, &s.conns, dw) })
	}
}

// unreachable is Connect's error when no session came within waited:
// recipe.ErrUnreachable (also matching context.DeadlineExceeded when
// ctx's deadline passed); ctx's cause alone when the caller cancelled ctx
// (as on every backend: a cancelled Connect is not a server that can't be
// reached), with the same description.
func (s *Session) unreachable(ctx context.Context, hosts []string, waited time.Duration, err error) error {
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		cause := context.Cause(ctx)
		if errors.Is(err, cause) {
			err = errors.New(strings.TrimSuffix(err.Error(), ": "+cause.Error()))
		}
		return fmt.Errorf("%w (no session with %s after %v: %s)", cause, strings.Join(hosts, ","),
			waited.Round(time.Millisecond), s.lastAttempt(err).Error())
	}
	return &recipe.OpError{Op: "connect", Err: s.lastAttempt(fmt.Errorf("%w: no session with %s after %v: %w", recipe.ErrUnreachable, strings.Join(hosts, ","),
		waited.Round(time.Millisecond), err))}
}

// lastAttempt returns err with the last dial's failure added, if any.
func (s *Session) lastAttempt(err error) error {
	if last := s.dials.lastError(); last != nil && !errors.Is(err, last) && !errors.Is(err, recipe.ErrWrongServer) {
		err = fmt.Errorf("%w (last attempt: %w)", err, last)
	}
	return err
}

// addAuth sends the credentials of WithAuth.
func (s *Session) addAuth(ctx context.Context) error {
	for _, a := range s.cfg.auth {
		if err := s.req.call(ctx, func() error { return s.conn.AddAuth(a.scheme, a.auth) }, nil); err != nil {
			err = &recipe.OpError{Op: "auth", Path: a.scheme, Err: zkError{err}}
			if errors.Is(err, recipe.ErrNoPermission) {
				return connerr.Refusal(err) // the same words on every backend
			}
			return err
		}
	}
	return nil
}

// Conn returns the underlying go-zookeeper connection, for operations the
// recipes don't cover; paths given to it are not adjusted for the chroot.
// Don't Close it: close the Session. A Session cannot be built on a
// *zk.Conn of the caller's (it needs the event callback and the dialer it
// gives zk.Connect): connect one beside it.
func (s *Session) Conn() *zk.Conn { return s.conn }

// ID returns the current ZooKeeper session ID (0 before the first session).
func (s *Session) ID() int64 { return s.conns.id() }

// State returns the current connection state. After Close it is recipe.StateLost.
func (s *Session) State() recipe.ConnState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns.state
}

// Done returns a channel closed when the ZooKeeper session that is current at
// the time of the call is LOST (expired, presumed expired, or closed). After a
// new session is established, Done returns a new channel.
func (s *Session) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns.epoch.ctx.Done()
}

// SessionTimeout returns the session timeout negotiated with the server (the
// requested one until a server has answered).
func (s *Session) SessionTimeout() time.Duration { return s.wire.sessionTimeout() }

// LastServerReply returns the send time of the newest request (pings
// included) that a server has answered: a lower bound for when the server
// last heard from this client, so the server cannot expire the session
// before LastServerReply + the session timeout. Ownership deadlines are
// counted from it, never from when a reply was read (after a pause, old
// replies read late would otherwise look fresh).
func (s *Session) LastServerReply() time.Time { return s.wire.lastReplyTime() }

// Close ends the ZooKeeper session, ends every live lease with cause
// recipe.ErrSessionClosed, stops the Session's goroutines (its deadlines, cleaner,
// listeners and request workers) and waits for them (up to about 2 s when
// no server answers). When a server receives the close, it
// deletes all the session's ephemeral znodes at once; when none can be
// reached, they stay until the server expires the session (one session
// timeout). It is idempotent and returns nil; operations after Close return
// recipe.ErrSessionClosed.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	wasLost := s.conns.state == recipe.StateLost
	id := s.conns.idLocked()
	s.conns.loseEpochLocked(recipe.ErrSessionClosed)
	if m := s.cfg.metrics; m != nil && wasLost {
		m.SessionState(recipe.StateLost, recipe.StateLost, recipe.ErrSessionClosed) // the close of a lost session is no transition, but recipe.Metrics counts it
	}
	s.cleaner.finishAllLocked() // a closed session's ephemerals go with it
	s.mu.unlock()
	s.pool.settle(250 * time.Millisecond) // see settle
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
	s.wire.dropConn()
	go s.conn.Close()
}

// shutdown stops the Session's goroutines and waits for them (and, if
// Close did not, marks it closed and ends the current epoch).
func (s *Session) shutdown() {
	s.mu.Lock()
	s.mu.closed = true
	s.life.Close()
	s.conns.loseEpochLocked(recipe.ErrSessionClosed)
	s.conns.disarmLocked()
	s.mu.unlock()
	s.life.Wait()
	s.pool.stop() // after conn.Close: every request a worker runs returns at once
	s.wire.hub.ended()
}

// abs turns a recipe path into the server path (chroot prepended).
func (s *Session) abs(p string) string { return s.chroot + p }

// ---- events (go-zookeeper's event callback: never blocks) ----

// onEvent is go-zookeeper's event callback: a watch event fires the shared
// watches, the child slots and a lease's own-node handling; a session event
// drives the state machine.
func (s *Session) onEvent(ev zk.Event) {
	if ev.Type == zk.EventSession {
		s.onStateEvent(ev)
		return
	}
	s.mu.Lock()
	defer s.mu.unlock()
	if ev.Type == zk.EventNodeDeleted && s.leases.byPath[ev.Path] != nil {
		// A process paused past its session timeout reads, when it resumes,
		// the notifications that waited in its socket: the deletion of its
		// own node by the session's expiry among them. Apply the ownership
		// deadlines first, so that such a loss is reported as the
		// suspension or session loss it is, not as a deletion by someone
		// else.
		s.conns.checkDeadlinesLocked(time.Now())
	}
	s.watches.onEventLocked(ev)
	s.leases.fireSlotsLocked(ev.Path)
	if l := s.leases.byPath[ev.Path]; l != nil {
		s.leases.onEventLocked(l, ev)
	}
}

// onStateEvent drives the state machine from go-zookeeper's session events.
func (s *Session) onStateEvent(ev zk.Event) {
	s.mu.Lock()
	defer s.mu.unlock()
	if s.mu.closed {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		s.conns.onSessionLocked(s.wire.sessionID.Load())
	case zk.StateDisconnected:
		if s.conns.state.IsConnected() {
			s.conns.suspendLocked(fmt.Errorf("%w: disconnected from %s", recipe.ErrSuspended, ev.Server))
		}
	case zk.StateExpired:
		if s.conns.epoch != nil {
			s.conns.loseEpochLocked(fmt.Errorf("%w: expired by the server", recipe.ErrSessionLost))
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
	if s.mu.closed {
		s.mu.Unlock()
		f.Close()
		return f.C()
	}
	s.conns.listeners.Add(f)
	s.life.Go(func() { // the Group closes after closed is set: never refused here
		defer func() {
			s.mu.Lock()
			s.conns.listeners.Remove(f)
			s.mu.Unlock()
		}()
		f.Run(ctx, s.quit)
	})
	s.mu.Unlock()
	return f.C()
}

// spawn runs f on a goroutine that Close waits for, and reports true;
// once the Session is closed it reports false and runs nothing.
func (s *Session) spawn(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.mu.closed && s.life.Go(f)
}

func (s *Session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closed
}
