// Package redisnemesis puts the Redis backend (backend/redislock) under the
// nemesis of testkit/nemesis: NewTarget makes a nemesis.Target of one
// single-node server started by redistest (append-only file fsynced before
// every reply), whose clients each connect through their own fault proxy
// and whose server the nemesis kills, freezes and keeps busy (faults.go).
//
// The Target's T (SessionTimeout) is the lock TTL: the server lets another
// client in no sooner than T after it ran the holder's last SET or renewal,
// while the holder's lease context ends 2/3·T after it sent that request
// (docs/backends.md). It keeps no fenced register in Redis yet.
package redisnemesis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// DefaultTTL is the lock TTL (T) of NewTarget's clients when it is given 0:
// the 2 s of the conformance suite and of ZooKeeper's nemesis sessions.
const DefaultTTL = 2 * time.Second

// Target is the Redis backend under the nemesis (a nemesis.Target and a
// nemesis.LeakFilter). It serves one run at a time.
type Target struct {
	srv    *redistest.Server
	ttl    time.Duration
	prefix string        // the key prefix of every client (redislock.WithKeyPrefix)
	admin  *redis.Client // direct, no proxy: setup, faults, checks

	mu     sync.Mutex
	base   string              // the run's base (Prepare)
	names  string              // the run's client-name prefix (Prepare)
	locks  map[string]lockKeys // the lock names the clients asked for, by name
	killed bool                // kill-server's downtime
	down   bool                // a restart failed: Heal restarts the server
	paused bool                // a Resume failed: Heal resumes it
}

// lockKeys are a lock's keys (redislock's layout, docs/backends.md).
type lockKeys struct{ holder, token, queue string }

// ErrExternalServer is matched (errors.Is) by NewTarget's error for the
// server of REDIS_TEST_ADDR: the nemesis kills, freezes and keeps busy its
// server, which must be one redistest started (Launch does).
var ErrExternalServer = errors.New("redisnemesis: the server is REDIS_TEST_ADDR's, not one started for the nemesis (its faults would hit someone else's server)")

// NewTarget returns the Target of srv with lock TTL ttl (0: DefaultTTL; at
// least redislock.MinTTL). srv must be a server redistest started
// (LaunchLocal, or Launch/Start without REDIS_TEST_ADDR): for the server of
// REDIS_TEST_ADDR the error matches ErrExternalServer and
// nemesis.ErrBadConfig. For the sleep-server fault on Redis 7 it needs
// redistest.WithDebugCommand; its append-only file should be fsynced
// always, as redistest's is. The Target uses its own key prefix under
// srv's; Close leaves srv running.
func NewTarget(srv *redistest.Server, ttl time.Duration) (*Target, error) {
	if srv.External() {
		return nil, fmt.Errorf("%w: %w (%s)", nemesis.ErrBadConfig, ErrExternalServer, srv.Addr())
	}
	if ttl == 0 {
		ttl = DefaultTTL
	}
	cfg := srv.ClientTLS()
	if cfg != nil {
		cfg.ServerName = "127.0.0.1" // redistest's certificate names it
	}
	return &Target{srv: srv, ttl: ttl, prefix: srv.KeyPrefix() + "nemesis:",
		admin: redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, TLSConfig: cfg}),
		locks: map[string]lockKeys{}}, nil
}

// Addr is the server's host:port.
func (t *Target) Addr() string { return t.srv.Addr() }

// Name is "redis".
func (t *Target) Name() string { return "redis" }

// SessionTimeout is the lock TTL.
func (t *Target) SessionTimeout() time.Duration { return t.ttl }

// Registers is nil: no fenced register is kept in Redis yet.
func (t *Target) Registers() []nemesis.Register { return nil }

// IgnoreLeaks ignores the reaper redistest starts for a server the
// kill-server fault restarted.
func (t *Target) IgnoreLeaks() []goleak.Option {
	return []goleak.Option{goleak.IgnoreAnyFunction("github.com/zkrecipes/zkrecipes/backend/redislock/redistest.spawn.func1")}
}

// Prepare deletes every key under the run's base (a previous run's lock
// keys and token counters) and names the run's clients afresh.
func (t *Target) Prepare(ctx context.Context, base string) error {
	t.mu.Lock()
	t.base, t.names = base, "zkr-nemesis-"+strings.ToLower(rand.Text()[:8])+"-"
	t.locks = map[string]lockKeys{}
	t.mu.Unlock()
	keys, err := t.keys(ctx)
	if err == nil && len(keys) > 0 {
		err = t.admin.Del(ctx, keys...).Err()
	}
	if err != nil {
		return fmt.Errorf("redisnemesis: clearing %s*: %w", t.prefix+base, err)
	}
	return nil
}

// keys lists the keys under the run's base.
func (t *Target) keys(ctx context.Context) ([]string, error) {
	t.mu.Lock()
	pattern := t.prefix + t.base + "*"
	t.mu.Unlock()
	var out []string
	iter := t.admin.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		out = append(out, iter.Val())
	}
	slices.Sort(out)
	return out, iter.Err()
}

// clientName is the CLIENT SETNAME of client i's connections, by which
// client-kill finds them and Leftovers counts them.
func (t *Target) clientName(i int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("%sc%d", t.names, i)
}

// Connect makes client i: a redislock Session whose every connection goes
// through p (WithDialer) and is named after the run and i.
func (t *Target) Connect(ctx context.Context, i int, p *serverkit.FaultProxy) (nemesis.Client, error) {
	u := t.srv.URL() + "?client_name=" + url.QueryEscape(t.clientName(i))
	opts := []redislock.Option{redislock.WithTTL(t.ttl), redislock.WithKeyPrefix(t.prefix),
		redislock.WithDialer(p.DialContext),
		// the nemesis cuts and kills all the time: the history says more
		redislock.WithLogger(slog.New(slog.DiscardHandler))}
	if cfg := t.srv.ClientTLS(); cfg != nil {
		opts = append(opts, redislock.WithTLS(cfg))
	}
	s, err := redislock.Connect(ctx, u, opts...)
	if err != nil {
		return nil, fmt.Errorf("redisnemesis: client %d: %w", i, err)
	}
	return &client{t: t, s: s}, nil
}

// client is one Session of the run.
type client struct {
	t *Target
	s *redislock.Session
}

// Lock returns redislock's Mutex on name and remembers its keys, for the
// delete-key fault.
func (c *client) Lock(name string) (recipe.Lock, error) {
	m, err := redislock.New(c.s, name)
	if err != nil {
		return nil, err
	}
	c.t.mu.Lock()
	c.t.locks[name] = lockKeys{holder: m.Key(), token: m.TokenKey(), queue: m.QueueKey()}
	c.t.mu.Unlock()
	return m, nil
}

func (c *client) Close() error { return c.s.Close() }

// Heal continues a paused server, restarts one whose restart failed, and
// returns once the server answers PING (at most 60 s, or ctx's end; a
// DEBUG SLEEP still running delays the answer to its end).
func (t *Target) Heal(ctx context.Context) error {
	t.mu.Lock()
	down, paused := t.down, t.paused
	t.mu.Unlock()
	var errs []error
	if down {
		if err := t.srv.Restart(ctx); err != nil {
			errs = append(errs, err)
		} else {
			t.setState(&t.down, false)
		}
	} else if paused {
		if err := t.srv.Resume(); err != nil {
			errs = append(errs, err)
		} else {
			t.setState(&t.paused, false)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := t.admin.Ping(pctx).Err()
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("redisnemesis: the server does not answer after the heal: %w", err))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.Join(errs...)
}

func (t *Target) setState(flag *bool, v bool) {
	t.mu.Lock()
	*flag = v
	t.mu.Unlock()
}

// Close closes the admin connection; the server keeps running.
func (t *Target) Close() error { return t.admin.Close() }

// Launch starts a server of its own for the nemesis
// (redistest.LaunchLocal with WithDebugCommand: AOF fsynced always, DEBUG
// allowed locally; never REDIS_TEST_ADDR's, which the faults would hit)
// and returns its Target with lock TTL ttl (0: DefaultTTL), and stop,
// which closes the Target and the server (its directory removed). For
// programs such as cmd/nemesis. The error wraps redistest.ErrNoServer,
// with the install hint, when no server can be started.
func Launch(ctx context.Context, ttl time.Duration) (t *Target, stop func() error, err error) {
	srv, err := redistest.LaunchLocal(ctx, redistest.WithDebugCommand())
	if err != nil {
		return nil, nil, err
	}
	if t, err = NewTarget(srv, ttl); err != nil {
		return nil, nil, errors.Join(err, srv.Close())
	}
	return t, func() error { return errors.Join(t.Close(), srv.Close()) }, nil
}
