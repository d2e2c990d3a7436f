package etcdlock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/zkrecipes/zkrecipes/internal/life"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Session is a client's membership in etcd: an etcd lease that it keeps
// alive, under which every lock key it puts lives (the counterpart of a
// ZooKeeper session). When its lease is lost (the server answers that it is
// gone, or no keep-alive was acknowledged in time) every Lease granted
// under it ends, every waiting Acquire returns, and the next acquisition
// grants a new etcd lease: a Session recovers by itself. A Session is safe
// for concurrent use. Close it when done.
type Session struct {
	cli      *clientv3.Client
	own      bool // Connect made cli: Close closes it
	cfg      config
	prefix   string
	log      *slog.Logger
	life     *life.Group   // Close ends its context (cause ErrSessionClosed) and waits for its goroutines
	granting chan struct{} // one lease grant at a time

	mu    sync.Mutex
	gen   *generation      // the newest etcd lease (possibly lost); nil before the first
	state recipe.ConnState // the last one reported to Metrics.SessionState; 0 before the first
	ended bool             // Close reported the last state
	// members are the member keys held by a Member of this Session
	// (group.go): one Member per key, so that a Register that finds the key
	// under the Session's own etcd lease knows the key is its own.
	members map[string]struct{}
}

// Connect opens a Session on the etcd cluster named by url,
// etcd://host:port[,host:port...][/prefix] (etcds:// for TLS), whose
// prefix (default: WithPrefix, else DefaultPrefix) is where the Session's
// locks keep their keys. It fails at once with ErrUnreachable when no
// endpoint accepts a connection, and otherwise waits at most the connect
// timeout for the Session's first lease. Errors: ErrBadURL,
// recipe.ErrBadOption, ErrUnreachable, recipe.ErrNoPermission, ctx's cause
// (see Connecting in the package documentation).
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
	tlsCfg, err := cfg.clientTLS(url)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.connectTimeout)
	defer cancel()
	var s *Session
	err = guard(ctx, endpoints, cfg.dialer, tlsCfg, func(ctx context.Context) (err error) {
		s, err = connect(ctx, endpoints, cfg, tlsCfg)
		return err
	})
	return s, err
}

// connect is Connect's dial of endpoints: the probe, the client, the first lease.
func connect(ctx context.Context, endpoints []string, cfg config, tlsCfg *tls.Config) (*Session, error) {
	if err := probe(ctx, endpoints, cfg.dialer, tlsCfg); err != nil {
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
		TLS:                  tlsCfg, // nil: plaintext
	}
	if cfg.dialer != nil {
		cc.DialOptions = append(cc.DialOptions, grpc.WithContextDialer(cfg.dialer))
	}
	cli, err := clientv3.New(cc) // does not block: the grant below is the first request
	if err != nil {
		return nil, &recipe.OpError{Op: "connect", Err: fmt.Errorf("%w: %w", ErrUnreachable, err)}
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
// WithDialer and WithTLS do not apply (configure cli instead). Errors:
// recipe.ErrBadOption, ErrUnreachable (no lease granted within the connect
// timeout), ctx's cause.
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
	s := &Session{cli: cli, own: own, cfg: cfg, prefix: cfg.prefix, log: cfg.logger, life: life.New(), granting: make(chan struct{}, 1)}
	if _, err := s.current(ctx); err != nil {
		s.life.Close()
		if errors.Is(err, context.DeadlineExceeded) || transient(err) {
			return nil, &recipe.OpError{Op: "connect", Err: fmt.Errorf("%w: granting a lease: %w", ErrUnreachable, err)}
		}
		return nil, err
	}
	return s, nil
}

// probe dials every endpoint at once and returns nil as soon as one
// accepts a TCP connection and, with tlsCfg, completes a TLS handshake and
// answers (handshake), or without, is not a TLS endpoint (plainAnswer); or
// an error matching ErrUnreachable with every endpoint's error when none
// does (a refused client certificate also matches recipe.ErrNoPermission).
func probe(ctx context.Context, endpoints []string, dial func(context.Context, string) (net.Conn, error), tlsCfg *tls.Config) error {
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
				if tlsCfg != nil {
					err = handshake(ctx, c, ep, tlsCfg)
				} else {
					err = plainAnswer(ctx, c, ep, dial)
				}
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
	return &recipe.OpError{Op: "connect", Err: fmt.Errorf("%w: %s: %w", ErrUnreachable, strings.Join(endpoints, ","), errors.Join(all...))}
}

// Client returns the etcd client of the Session, for requests the locks
// don't cover. Don't close it: close the Session.
func (s *Session) Client() *clientv3.Client { return s.cli }

// Prefix returns the key prefix of the Session's locks.
func (s *Session) Prefix() string { return s.prefix }

// Identity returns the identity the Session's acquisitions publish as
// their keys' value (WithIdentity, else "<hostname>:<pid>").
func (s *Session) Identity() string { return s.cfg.identity }

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
// recipe.ErrSessionClosed. Close does not release: a Lease of a lock with
// WithLockDelay that is not released first ends uncleanly, and its next
// holder serves the delay.
func (s *Session) Close() error {
	if !s.life.Close() {
		return nil
	}
	s.mu.Lock()
	g := s.gen
	s.mu.Unlock()
	if g.ctx.Err() == nil { // a lease presumed lost has its own revoke running
		g.lose(recipe.ErrSessionClosed)
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		if err := s.revoke(ctx, g); err != nil {
			s.log.Info("etcdlock: revoking the lease at close failed; its keys stay until it expires",
				"lease", fmt.Sprintf("%x", int64(g.id)), "error", err)
		}
		cancel()
	}
	s.mu.Lock()
	s.report(recipe.StateLost, recipe.ErrSessionClosed)
	s.ended = true
	s.mu.Unlock()
	s.life.Wait()
	if s.own {
		_ = s.cli.Close()
	}
	s.log.Debug("etcdlock: session closed")
	return nil
}

// publish makes g the Session's newest etcd lease and reports it granted
// (CONNECTED for the first, RECONNECTED after) unless it is lost already,
// or reports false (publishing nothing) when the Session is closed.
func (s *Session) publish(g *generation) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.life.Closed() {
		return false
	}
	s.gen = g
	if !g.down {
		g.announced = true
		to := recipe.StateReconnected
		if s.state == 0 {
			to = recipe.StateConnected
		}
		s.report(to, nil)
	}
	return true
}

// lost reports the loss of g (called by lose, before g's context ends):
// SUSPENDED for a presumed loss, LOST otherwise; nothing for a generation
// never reported granted, nor at Close, which reports the last LOST itself.
func (s *Session) lost(g *generation, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g.down = true
	if !g.announced || errors.Is(cause, recipe.ErrSessionClosed) {
		return
	}
	to := recipe.StateLost
	if errors.Is(cause, recipe.ErrSuspended) {
		to = recipe.StateSuspended
	}
	s.report(to, cause)
}

// report records the Session's state to (s.mu held) and gives the
// transition to Metrics.SessionState, unless Close reported the last one.
func (s *Session) report(to recipe.ConnState, cause error) {
	if s.ended {
		return
	}
	if m := s.cfg.metrics; m != nil {
		m.SessionState(s.state, to, cause)
	}
	s.state = to
}
