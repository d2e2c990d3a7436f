package redislock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/internal/ctxend"
	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/life"
	"github.com/zkrecipes/zkrecipes/internal/userinfo"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Session is a connection to one Redis server (a go-redis client and its
// pool) and the settings its locks share: TTL and key prefix. Redis has no
// server-side session: every grant is a key with its own expiry, kept alive
// by its own renewals. Close releases what the session still holds. A
// Session is safe for concurrent use.
type Session struct {
	cli     *redis.Client
	owned   bool // Close closes cli
	ttl     time.Duration
	prefix  string
	log     *slog.Logger
	metrics recipe.Metrics // nil: none
	ident   string         // the readable part of every owner id (WithIdentity)
	poll    time.Duration  // ObserveHolder's interval (WithHolderPoll)

	// life counts what uses cli (acquisitions, renewers, releases,
	// background cleanups); its Context ends waiting acquisitions at Close.
	// bg is the context of background cleanups, cancelled when Close has
	// released the session's leases.
	life   *life.Group
	bg     context.Context
	stopBG context.CancelFunc

	mu     sync.Mutex
	leases map[*lease]struct{} // the live leases

	wake *wakeups // the waiters' shared pub/sub connection

	stopLogs func() // ends go-redis's lines to log (logs.go)
}

// Connect parses url (redis://[user:password@]host:port[/db], or rediss://
// for TLS; go-redis query parameters such as dial_timeout are honoured),
// checks that the server answers PING and is a primary, and returns a
// Session that owns its client, one with ContextTimeoutEnabled and no
// automatic retries. Errors: ErrBadURL (nothing dialled),
// recipe.ErrBadOption, a *recipe.OpError (also matching
// recipe.ErrUnreachable when the network failed), ErrNotPrimary,
// recipe.ErrNoPermission; none shows the URL's password (see Connecting in
// the package documentation).
func Connect(ctx context.Context, rawURL string, opts ...Option) (*Session, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	ro, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	ro.MaxRetries = -1
	ro.ContextTimeoutEnabled = true
	if ro.DialerRetries == 0 { // not set in the URL
		ro.DialerRetries = 1
	}
	// Maintenance notifications are a Redis Enterprise/Cloud handshake the
	// single-node servers this package targets don't speak.
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if c.dialer != nil {
		ro.Dialer = c.dialer
	}
	c.applyTLS(ro)
	cli := redis.NewClient(ro)
	var s *Session
	err = guard(ctx, cli.Options(), c, func(ctx context.Context) (err error) {
		s, err = newSession(ctx, cli, true, c, userinfo.Secrets(rawURL))
		return err
	})
	if err != nil {
		_ = cli.Close()
		return nil, hideClient(err, cli, rawURL)
	}
	return s, nil
}

// NewSession returns a Session on an existing client, which it does not own:
// Close leaves cli open. The client must be a plain single-server client
// (not a failover client: a promoted replica can lose grants and tokens)
// with ContextTimeoutEnabled set; its MaxRetries is harmless. Errors:
// recipe.ErrBadOption for a nil client, a client without
// ContextTimeoutEnabled, WithDialer, WithTLS or an invalid option;
// otherwise as Connect.
func NewSession(ctx context.Context, cli *redis.Client, opts ...Option) (*Session, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	switch {
	case cli == nil:
		return nil, fmt.Errorf("%w: nil client", recipe.ErrBadOption)
	case !cli.Options().ContextTimeoutEnabled:
		return nil, fmt.Errorf("%w: the client must have ContextTimeoutEnabled set (a renewal must end at the lease's deadline)", recipe.ErrBadOption)
	case c.dialer != nil:
		return nil, fmt.Errorf("%w: WithDialer is for Connect; the client has its own dialer", recipe.ErrBadOption)
	case c.tlsSet:
		return nil, fmt.Errorf("%w: WithTLS is for Connect; set the client's TLSConfig", recipe.ErrBadOption)
	}
	s, err := newSession(ctx, cli, false, c, nil)
	if err != nil {
		return nil, hideClient(err, cli, "")
	}
	return s, nil
}

// parseURL checks raw and returns go-redis's options for it. Its errors show
// raw with the passwords hidden (userinfo.Redact) and never net/url's error
// as it is: that quotes the whole URL, and, in its detail, a host that can
// be a part of a misplaced password ("redis://:pa/ss@h": host ":pa").
func parseURL(raw string) (*redis.Options, error) {
	shown := userinfo.Redact(raw)
	bad := func(why string) error { return fmt.Errorf("%w: %q: %s", ErrBadURL, shown, why) }
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if shown != raw || !errors.As(err, &ue) { // it may quote a part of the password
			return nil, bad("not a URL")
		}
		return nil, bad("not a URL: " + ue.Err.Error())
	}
	switch {
	case u.Scheme != "redis" && u.Scheme != "rediss":
		return nil, bad("the scheme must be redis:// or rediss://")
	case u.Hostname() == "":
		return nil, bad("no host")
	case strings.Contains(u.Host, ","):
		return nil, bad("one server only (locks live on a single Redis node)")
	}
	ro, err := redis.ParseURL(raw)
	if err != nil { // it quotes the scheme, path or query values, which can hold a password
		return nil, bad(userinfo.Scrub(err.Error(), userinfo.Secrets(raw)...))
	}
	return ro, nil
}

// newSession checks the server of cli and returns the Session; go-redis's
// own log lines go to c's logger from now on (scrubbed of cli's password
// and secrets), until Close or a failure here.
func newSession(ctx context.Context, cli *redis.Client, owned bool, c *config, secrets []string) (s *Session, err error) {
	stopLogs := watchLogs(c.logger, append(secrets, cli.Options().Password))
	defer func() {
		if err != nil {
			stopLogs()
		}
	}()
	if err := cli.Ping(ctx).Err(); err != nil {
		// TLS 1.3 refuses a client certificate on the first read; one
		// refused in the handshake is described by the dialer already.
		if connerr.KindOf(err) == connerr.Refused && !errors.Is(err, recipe.ErrNoPermission) {
			err, _ = connerr.Handshake(err, cli.Options().Addr, cli.Options().TLSConfig, tlsHint)
		}
		if ctxend.Ended(ctx) && errors.Is(err, context.DeadlineExceeded) && c.lastTLS.noAnswer() {
			// go-redis says only that ctx ended: keep the dialer's hint.
			err, _ = connerr.Handshake(err, cli.Options().Addr, nil, tlsHint)
		}
		if !ctxend.Ended(ctx) && isNetError(err) && c.lastTLS.certUnsent() && !errors.Is(err, recipe.ErrNoPermission) {
			// TLS 1.3: the server refuses the missing certificate after the
			// handshake; the first write can meet its reset before the
			// first read meets its alert.
			// Described as the alert would be (ErrNoPermission, then
			// ErrUnreachable below).
			err = connerr.Mark(fmt.Errorf("%s closed the connection after asking for a client certificate, and none was presented: %w",
				cli.Options().Addr, err), recipe.ErrNoPermission)
		}
		if !ctxend.Ended(ctx) && isNetError(err) {
			err = fmt.Errorf("%w: %w", recipe.ErrUnreachable, plainToTLS(ctx, cli, err))
		}
		var re redis.Error
		switch {
		case errors.As(err, &re) && refusesCredentials(re.Error()) && !ctxend.Ended(ctx):
			return nil, connerr.Refusal(err) // the same words on every backend
		case !errors.As(err, &re) && ctxend.Ended(ctx):
			// ctx's deadline passed before the server answered:
			// unreachable and the deadline, as on every backend.
			if e := connerr.TimedOut(ctx, err); e != err {
				return nil, e
			}
		}
		return nil, &recipe.OpError{Op: "connect", Err: classify(ctx, err)}
	}
	s = &Session{cli: cli, owned: owned, ttl: c.ttl, prefix: c.prefix, log: c.logger, metrics: c.metrics,
		ident: c.ident, poll: c.poll, life: life.New(), leases: make(map[*lease]struct{}), stopLogs: stopLogs}
	s.wake = &wakeups{s: s, subs: make(map[string]*sub)}
	if err := s.checkServer(ctx); err != nil {
		return nil, err
	}
	if err := s.checkRights(ctx); err != nil {
		return nil, err
	}
	s.bg, s.stopBG = context.WithCancel(context.Background())
	return s, nil
}

// checkServer refuses a replica and warns about settings that make tokens or
// grants undurable: no fsynced append-only file, replicas, eviction. Servers that hide ROLE or CONFIG (managed services) get
// an informational log line instead.
func (s *Session) checkServer(ctx context.Context) error {
	role, err := s.cli.Do(ctx, "ROLE").Slice()
	switch {
	case err != nil || len(role) == 0:
		s.log.Info("redislock: can't read the server's role", "err", err)
	case role[0] != "master":
		return fmt.Errorf("%w (ROLE says %v)", ErrNotPrimary, role[0])
	case len(role) > 2 && hasItems(role[2]):
		s.log.Warn("redislock: the server has replicas; replication is asynchronous, so a failover to one can lose grants and repeat tokens: never fail over while locks are in use",
			"replicas", role[2])
	}
	cfg, err := s.cli.ConfigGet(ctx, "append*").Result()
	switch {
	case err != nil:
		s.log.Info("redislock: can't read the server's persistence settings", "err", err)
	case cfg["appendonly"] != "yes" || cfg["appendfsync"] != "always":
		s.log.Warn("redislock: the server does not fsync every write (want appendonly yes, appendfsync always): after a server crash tokens can repeat and a held lock can be granted again",
			"appendonly", cfg["appendonly"], "appendfsync", cfg["appendfsync"])
	}
	mem, err := s.cli.ConfigGet(ctx, "maxmemory*").Result()
	switch {
	case err != nil:
	case mem["maxmemory"] != "0" && mem["maxmemory-policy"] != "noeviction":
		s.log.Warn("redislock: the server evicts keys when full (want maxmemory-policy noeviction): an evicted token counter starts again from 1, an evicted lock key frees the lock",
			"maxmemory", mem["maxmemory"], "maxmemory-policy", mem["maxmemory-policy"])
	}
	return nil
}

func hasItems(v any) bool {
	items, ok := v.([]any)
	return ok && len(items) > 0
}

// TTL returns the lease time of the session's grants (see WithTTL).
func (s *Session) TTL() time.Duration { return s.ttl }

// Close ends the session: waiting Acquire calls return
// recipe.ErrSessionClosed, every lease still live ends with that cause and
// its key is deleted (owner-checked, retried up to the TTL), and Close
// waits for the session's background work to end before it closes a client
// it owns. Later calls on the session, its locks or its leases return
// errors matching recipe.ErrSessionClosed. Close is idempotent; it returns
// the client's close error (see Close in the package documentation).
func (s *Session) Close() error {
	if !s.life.Close() {
		return nil
	}
	s.mu.Lock()
	live := make([]*lease, 0, len(s.leases))
	for l := range s.leases {
		live = append(live, l)
	}
	s.mu.Unlock()

	var wg sync.WaitGroup
	for _, l := range live {
		if l.end(recipe.ErrSessionClosed) {
			wg.Go(func() {
				if err := l.m.deleteOwned(context.Background(), l.owner, unclean); err != nil {
					s.log.Warn("redislock: Close could not delete a held lock; it expires within the TTL", "key", l.m.key, "err", err)
				}
			})
		}
	}
	wg.Wait()
	s.stopBG()
	s.life.Wait()
	s.wake.close()
	defer s.stopLogs()
	if s.owned {
		return s.cli.Close()
	}
	return nil
}

// errClosed is the error of operations on a closed session.
var errClosed = fmt.Errorf("redislock: %w", recipe.ErrSessionClosed)

// register makes l a live lease of the session, arms its deadline for the
// grant sent at sent and starts its renewals, or returns errClosed if Close
// has started (the caller then deletes its key).
func (s *Session) register(l *lease, sent time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.life.Enter() { // the renewer's count
		return errClosed
	}
	l.deadline = grant.NewDeadline(sent, lossAfter(s.ttl), func() { l.lose(errNoRenewal) })
	s.leases[l] = struct{}{}
	go func() {
		defer s.life.Exit()
		l.keepAlive(sent)
	}()
	return nil
}

// isNetError reports whether err is a failure to reach the server (a dial,
// read or write error of the network, or a timeout), as opposed to an answer
// from it: Connect's error then also matches recipe.ErrUnreachable.
func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
