package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/zkrecipes/zkrecipes/internal/ctxend"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Session is a client's membership in etcd: an etcd lease that it keeps
// alive, under which every lock key it puts lives. It is the counterpart of
// a ZooKeeper session. When its lease is lost (the server answers that it is
// gone, or no keep-alive was acknowledged in time) every Lease granted
// under it ends, every waiting Acquire returns, and the next acquisition
// grants a new etcd lease: a Session recovers by itself.
//
// A Session is safe for concurrent use. Close it when done.
type Session struct {
	cli    *clientv3.Client
	own    bool // Connect made cli: Close closes it
	cfg    config
	prefix string
	log    *slog.Logger

	ctx    context.Context // done at Close, cause ErrSessionClosed
	cancel context.CancelCauseFunc
	grant  chan struct{} // one lease grant at a time

	mu     sync.Mutex
	closed bool
	gen    *generation // the newest etcd lease (possibly lost); nil before the first
	wg     sync.WaitGroup
}

// generation is one etcd lease of a Session and the keep-alive loop that
// renews it.
type generation struct {
	s   *Session
	id  clientv3.LeaseID
	ttl time.Duration // as granted
	// ctx is done when the lease is lost; its cause says why (matching
	// recipe.ErrSessionLost, recipe.ErrSuspended or recipe.ErrSessionClosed).
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu     sync.Mutex
	acked  time.Time           // send time of the newest acknowledged grant or keep-alive
	timer  *time.Timer         // fires at the ownership deadline
	leases map[*lease]struct{} // live grants under this lease, ended by lose
}

// Connect opens a Session on the etcd cluster named by url:
//
//	etcd://host:port[,host:port...][/prefix]
//
// The prefix (default: WithPrefix, else DefaultPrefix) is where the
// Session's locks keep their keys. Connect dials every endpoint first and
// fails at once with an error matching ErrUnreachable (and wrapping the dial
// errors) when none accepts a connection; then it grants the Session's first
// lease, waiting at most the connect timeout. The connection is plain
// (no TLS, no authentication): for those, configure a clientv3.Client
// yourself and use NewSession.
//
// Errors: ErrBadURL, recipe.ErrBadOption, ErrUnreachable, ctx's cause.
func Connect(ctx context.Context, url string, opts ...Option) (*Session, error) {
	endpoints, prefix, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	if prefix != "" {
		cfg.prefix = prefix
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.connectTimeout)
	defer cancel()
	if err := probe(ctx, endpoints, cfg.dialer); err != nil {
		return nil, err
	}
	cc := clientv3.Config{
		Endpoints: endpoints,
		Logger:    zap.NewNop(),
		// gRPC pings a connection with live streams that has been silent
		// this long, and closes it if no answer comes back in the timeout,
		// so that a half-open connection is replaced (10 s is gRPC's
		// minimum; etcd refuses pings more often than every 5 s).
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
	}
	if cfg.dialer != nil {
		cc.DialOptions = append(cc.DialOptions, grpc.WithContextDialer(cfg.dialer))
	}
	cli, err := clientv3.New(cc) // does not block: the grant below is the first request
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	s, err := newSession(ctx, cli, true, cfg)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return s, nil
}

// NewSession opens a Session on an existing client, for a client that needs
// TLS, authentication or other settings Connect does not offer. The Session
// does not close cli; cli must stay open until the Session is closed.
// WithDialer does not apply (configure cli instead).
//
// Errors: recipe.ErrBadOption, ErrUnreachable (no lease granted within the
// connect timeout), ctx's cause.
func NewSession(ctx context.Context, cli *clientv3.Client, opts ...Option) (*Session, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(cfg.connectOnly) > 0 {
		return nil, fmt.Errorf("%w: %s applies to Connect only", recipe.ErrBadOption, strings.Join(cfg.connectOnly, ", "))
	}
	if cli == nil {
		return nil, fmt.Errorf("%w: nil client", recipe.ErrBadOption)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.connectTimeout)
	defer cancel()
	return newSession(ctx, cli, false, cfg)
}

func newSession(ctx context.Context, cli *clientv3.Client, own bool, cfg config) (*Session, error) {
	if cfg.prefix == "" {
		cfg.prefix = DefaultPrefix
	}
	s := &Session{cli: cli, own: own, cfg: cfg, prefix: cfg.prefix, log: cfg.logger, grant: make(chan struct{}, 1)}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	if _, err := s.current(ctx); err != nil {
		s.cancel(recipe.ErrSessionClosed)
		if errors.Is(err, context.DeadlineExceeded) || transient(err) {
			return nil, fmt.Errorf("%w: granting a lease: %w", ErrUnreachable, err)
		}
		return nil, err
	}
	return s, nil
}

// probe dials every endpoint at once and returns nil as soon as one
// accepts a TCP connection, or an error matching ErrUnreachable with every
// dial error when none does.
func probe(ctx context.Context, endpoints []string, dial func(context.Context, string) (net.Conn, error)) error {
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(endpoints))
	for _, ep := range endpoints {
		go func() {
			c, err := dial(ctx, ep)
			if err == nil {
				_ = c.Close()
			}
			errs <- err
		}()
	}
	var all []error
	for range endpoints {
		err := <-errs
		if err == nil {
			return nil
		}
		all = append(all, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnreachable, strings.Join(endpoints, ","), errors.Join(all...))
}

// Client returns the etcd client of the Session, for requests the locks
// don't cover. Don't close it: close the Session.
func (s *Session) Client() *clientv3.Client { return s.cli }

// Prefix returns the key prefix of the Session's locks.
func (s *Session) Prefix() string { return s.prefix }

// ID returns the ID of the Session's newest etcd lease (possibly lost).
func (s *Session) ID() clientv3.LeaseID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen.id
}

// TTL returns the time to live the server granted the newest etcd lease.
func (s *Session) TTL() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen.ttl
}

// Done returns a channel closed when the etcd lease that is the Session's
// newest at the time of the call is lost (revoked, expired, presumed expired
// because no keep-alive was acknowledged in time, or Close). After the next
// acquisition grants a new lease, Done returns a new channel.
func (s *Session) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen.ctx.Done()
}

// Close ends every live Lease of the Session (cause recipe.ErrSessionClosed)
// and every waiting acquisition, revokes the etcd lease (which deletes all of
// the Session's keys at once; when the server can't be reached within 2 s,
// the keys stay until the lease expires, one TTL after the last keep-alive),
// stops the Session's goroutines and, for a Session made by Connect, closes
// the client. It is idempotent and returns nil; later acquisitions return
// recipe.ErrSessionClosed.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	g := s.gen
	s.mu.Unlock()
	if g.ctx.Err() == nil { // a lease presumed lost has its own revoke running
		g.lose(recipe.ErrSessionClosed)
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		if _, err := s.cli.Revoke(ctx, g.id); err != nil {
			s.log.Info("etcdlock: revoking the lease at close failed; its keys stay until it expires",
				"lease", fmt.Sprintf("%x", int64(g.id)), "error", err)
		}
		cancel()
	}
	s.cancel(recipe.ErrSessionClosed)
	s.wg.Wait()
	if s.own {
		_ = s.cli.Close()
	}
	s.log.Debug("etcdlock: session closed")
	return nil
}

// goTracked runs f on a goroutine that Close waits for, or reports false
// (running nothing) when the Session is closed.
func (s *Session) goTracked(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// bind returns a context done when ctx or the Session ends (cause
// recipe.ErrSessionClosed for the latter).
func (s *Session) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	return withAlso(ctx, s.ctx)
}

// withAlso returns a context done when ctx or other is, with the cause of
// the one that ended first.
func withAlso(ctx, other context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(other, func() { cancel(context.Cause(other)) })
	return c, func() { stop(); cancel(context.Canceled) }
}

// current returns the Session's live etcd lease, granting a new one when the
// newest is lost (one grant at a time; concurrent callers share it).
func (s *Session) current(ctx context.Context) (*generation, error) {
	for {
		s.mu.Lock()
		closed, g := s.closed, s.gen
		s.mu.Unlock()
		if closed {
			return nil, recipe.ErrSessionClosed
		}
		if g != nil && g.live() {
			return g, nil
		}
		select {
		case s.grant <- struct{}{}:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-s.ctx.Done():
			return nil, recipe.ErrSessionClosed
		}
		s.mu.Lock()
		fresh := s.gen != g
		s.mu.Unlock()
		if fresh { // granted by another caller meanwhile: look again
			<-s.grant
			continue
		}
		g, err := s.newGeneration(ctx)
		<-s.grant
		return g, err
	}
}

// newGeneration grants a new etcd lease and starts keeping it alive.
func (s *Session) newGeneration(ctx context.Context) (*generation, error) {
	ctx, cancel := s.bind(ctx)
	defer cancel()
	sent := time.Now()
	resp, err := s.cli.Grant(ctx, int64(s.cfg.ttl/time.Second))
	if err != nil {
		if ctxend.Ended(ctx) {
			return nil, ctxend.Cause(ctx)
		}
		return nil, opError("grant", "", err)
	}
	g := &generation{s: s, id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second, acked: sent, leases: map[*lease]struct{}{}}
	g.ctx, g.cancel = context.WithCancelCause(context.Background())
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		g.cancel(recipe.ErrSessionClosed)
		rctx, rcancel := context.WithTimeout(context.Background(), closeTimeout)
		_, _ = s.cli.Revoke(rctx, g.id)
		rcancel()
		return nil, recipe.ErrSessionClosed
	}
	s.gen = g
	g.mu.Lock()
	g.timer = time.AfterFunc(time.Until(g.deadlineLocked()), g.checkDeadline)
	g.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		g.keepAlive()
	}()
	s.mu.Unlock()
	s.log.Debug("etcdlock: lease granted", "lease", fmt.Sprintf("%x", int64(g.id)), "ttl", g.ttl)
	return g, nil
}

// cleanupTimeout is the configured one, or the granted TTL.
func (g *generation) cleanupTimeout() time.Duration {
	if t := g.s.cfg.cleanupTimeout; t > 0 {
		return t
	}
	return g.ttl
}

// deadlineLocked is when ownership under this lease ends unless a newer
// keep-alive is acknowledged: 2/3 of the TTL after the send of the newest
// acknowledged one. The server can't expire the lease before a full TTL
// after it received that keep-alive, which was after we sent it; the last
// third is the margin for our timer firing late and for clock drift.
func (g *generation) deadlineLocked() time.Time { return g.acked.Add(g.ttl * 2 / 3) }

// live reports whether the lease is live, ending it if its deadline passed
// (in case the timer has not fired yet).
func (g *generation) live() bool {
	g.checkDeadline()
	return g.ctx.Err() == nil
}

// checkDeadline ends the lease (recipe.ErrSuspended) if its deadline passed.
func (g *generation) checkDeadline() {
	g.mu.Lock()
	late := !time.Now().Before(g.deadlineLocked())
	g.mu.Unlock()
	if late {
		g.lose(fmt.Errorf("%w: no keep-alive of etcd lease %x acknowledged within %v of its send",
			recipe.ErrSuspended, int64(g.id), g.ttl*2/3))
	}
}

// ack records an acknowledged keep-alive sent at sent.
func (g *generation) ack(sent time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ctx.Err() != nil || !sent.After(g.acked) {
		return
	}
	g.acked = sent
	g.timer.Reset(time.Until(g.deadlineLocked()))
}

// lose ends the lease, and every grant under it, with cause (the first
// cause wins). A lease presumed
// lost (recipe.ErrSuspended) may still live on the server: one revoke is
// tried in the background, so that its keys go at once if the server is
// reachable again.
func (g *generation) lose(cause error) {
	g.mu.Lock()
	if g.ctx.Err() != nil {
		g.mu.Unlock()
		return
	}
	for l := range g.leases { // at once, and before Session.Done is closed
		l.cancel(cause)
	}
	g.leases = nil
	g.cancel(cause)
	if g.timer != nil {
		g.timer.Stop()
	}
	g.mu.Unlock()
	s := g.s
	level := slog.LevelInfo
	if errors.Is(cause, recipe.ErrSessionClosed) {
		level = slog.LevelDebug
	}
	s.log.Log(context.Background(), level, "etcdlock: lease lost", "lease", fmt.Sprintf("%x", int64(g.id)), "cause", cause)
	if errors.Is(cause, recipe.ErrSuspended) {
		s.goTracked(func() {
			ctx, cancel := s.bind(context.Background())
			defer cancel()
			ctx, cancel2 := context.WithTimeout(ctx, g.ttl)
			defer cancel2()
			_, err := s.cli.Revoke(ctx, g.id)
			s.log.Debug("etcdlock: revoke of a lease presumed lost", "lease", fmt.Sprintf("%x", int64(g.id)), "error", err)
		})
	}
}

// gone asks the server whether the lease still exists, ending it with
// recipe.ErrSessionLost if not, and reports whether it is lost. It tells a
// key deleted by someone else from a key that went with its lease.
func (g *generation) gone(ctx context.Context) bool {
	resp, err := g.s.cli.TimeToLive(ctx, g.id)
	if err == nil && resp.TTL <= 0 || errors.Is(err, rpctypes.ErrLeaseNotFound) {
		g.lose(fmt.Errorf("%w: etcd lease %x is gone (expired or revoked)", recipe.ErrSessionLost, int64(g.id)))
	}
	return g.ctx.Err() != nil
}

// keepAlive renews the lease every TTL/6 until it is lost, recording the
// send time of each acknowledged keep-alive. It sends one keep-alive at a
// time, each bounded by the ownership deadline, and retries a failed one
// after a short pause. The answer "lease not found" ends the lease with
// recipe.ErrSessionLost.
func (g *generation) keepAlive() {
	every := g.ttl / 6
	retry := min(every/4, 250*time.Millisecond)
	g.mu.Lock()
	next := g.acked.Add(every)
	g.mu.Unlock()
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		g.mu.Lock()
		ctx, cancel := context.WithDeadline(g.ctx, g.deadlineLocked())
		g.mu.Unlock()
		_, err := g.s.cli.KeepAliveOnce(ctx, g.id)
		cancel()
		switch {
		case err == nil:
			g.ack(sent)
			next = sent.Add(every)
		case g.ctx.Err() != nil:
			return
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			g.lose(fmt.Errorf("%w: etcd lease %x is gone (expired or revoked)", recipe.ErrSessionLost, int64(g.id)))
			return
		default:
			g.s.log.Debug("etcdlock: keep-alive failed", "lease", fmt.Sprintf("%x", int64(g.id)), "error", err)
			next = time.Now().Add(retry)
		}
		t.Reset(time.Until(next))
	}
}
