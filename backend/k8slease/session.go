package k8slease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/zkrecipes/zkrecipes/backend/k8slease/internal/conntrack"
	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/internal/life"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Session is a client of one Kubernetes API server with an identity of its
// own: every lock made from it (New) writes that identity, with a grant
// number, as the holderIdentity of the Lease it holds. A Session holds no
// state on the server (unlike a ZooKeeper session or an etcd lease): each
// grant is kept alive by its own renewals. A Session is safe for
// concurrent use. Close it when done.
type Session struct {
	cli      coordclient.CoordinationV1Interface
	conns    *conntrack.Tracker // Connect's client's connections, closed by Close
	cfg      config
	log      *slog.Logger
	identity string
	life     *life.Group
	grants   atomic.Uint64 // numbers the grants' holder identities

	mu        sync.Mutex
	closed    bool
	leases    map[*lease]struct{}     // live grants, ended and cleared by Close
	seen      map[string]*observation // per lock: the newest version seen and when
	rights    map[string]bool         // per lock: its rights were found granted (checkRights)
	watchless map[string]bool         // per lock: a watch was refused (said once)
}

// Connect opens a Session on the API server of cfg (from
// ConfigFromKubeconfig, rest.InClusterConfig or built by hand; it is
// copied, not changed, and gets no client-side rate limit unless it sets
// one). It sends one request, the discovery of coordination.k8s.io/v1, and
// waits at most the connect timeout for it. Errors: recipe.ErrBadOption,
// ErrUnreachable (no answer), an error matching recipe.ErrNoPermission when
// the server refuses the credentials, a *recipe.OpError for other
// refusals, ctx's cause (see Connecting in the package documentation).
func Connect(ctx context.Context, cfg *rest.Config, opts ...Option) (*Session, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%w: nil *rest.Config", recipe.ErrBadOption)
	}
	c := rest.CopyConfig(cfg)
	if c.QPS == 0 && c.RateLimiter == nil {
		c.QPS = -1 // no client-side limit (client-go: a negative QPS disables it)
	}
	cs := conntrack.New(c.Dial)
	c.Dial = cs.Dial
	cli, err := coordclient.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", recipe.ErrBadOption, err)
	}
	s, err := NewSession(ctx, cli, opts...)
	if err != nil {
		cs.CloseAll()
		return nil, err
	}
	s.conns = cs
	return s, nil
}

// ConfigFromKubeconfig loads the API server, credentials and TLS settings
// of a kubeconfig file's current context. An empty path means client-go's
// usual search ($KUBECONFIG, then ~/.kube/config), and, when that finds no
// file, the in-cluster configuration of a Pod's service account. The
// kubeconfig's namespace is not applied: give it with WithNamespace.
func ConfigFromKubeconfig(path string) (*rest.Config, error) {
	if path == "" {
		// client-go's deferred loading falls back to the in-cluster
		// configuration when no kubeconfig is found.
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	}
	return clientcmd.BuildConfigFromFlags("", path)
}

// NewSession opens a Session on an existing client of coordination.k8s.io/v1,
// for settings Connect does not offer. The Session does not own cli.
// Errors as for Connect.
func NewSession(ctx context.Context, cli coordclient.CoordinationV1Interface, opts ...Option) (*Session, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	if cli == nil {
		return nil, fmt.Errorf("%w: nil client", recipe.ErrBadOption)
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	s := &Session{cli: cli, cfg: cfg, log: cfg.logger, identity: newIdentity(cfg.identity), life: life.New(),
		leases: map[*lease]struct{}{}, seen: map[string]*observation{}, rights: map[string]bool{}, watchless: map[string]bool{}}
	if err := s.probe(ctx); err != nil {
		return nil, err
	}
	if cfg.duration < AdvisedLeaseDuration {
		s.log.Warn("k8slease: a lease duration this short leaves little time for a slow API server (every renewal must be answered within 2/3 of it); keep it at least 5s outside tests",
			"lease_duration", cfg.duration)
	}
	if m := cfg.metrics; m != nil {
		m.SessionState(0, recipe.StateConnected, nil)
	}
	return s, nil
}

// probe asks for the discovery document of coordination.k8s.io/v1: the
// server answers, accepts the credentials, and serves Leases.
func (s *Session) probe(ctx context.Context) error {
	rc := s.cli.RESTClient()
	if rc == nil {
		return nil // a client without REST transport (a test double)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.connectTimeout)
	defer cancel()
	_, err := rc.Get().AbsPath("/apis/coordination.k8s.io/v1").DoRaw(ctx)
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return opError("discover", "coordination.k8s.io/v1", fmt.Errorf("the server does not serve Leases: %w", err))
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return connerr.Refusal(opError("discover", "coordination.k8s.io/v1", err)) // the same words on every backend
	case ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) || transient(err):
		return &recipe.OpError{Op: "connect", Err: fmt.Errorf("%w: %w", ErrUnreachable, err)}
	}
	return opError("discover", "coordination.k8s.io/v1", err)
}

// Identity returns the Session's identity: the start of the holderIdentity
// of every grant it makes ("<identity>#<grant number>").
func (s *Session) Identity() string { return s.identity }

// Client returns the client of the Session, for requests the locks don't
// cover.
func (s *Session) Client() coordclient.CoordinationV1Interface { return s.cli }

// LeaseDuration returns the leaseDurationSeconds the Session's holders write.
func (s *Session) LeaseDuration() time.Duration { return s.cfg.duration }

// holderID returns a new holder identity: each grant has its own, so that
// two Acquire calls of one Session are two contenders.
func (s *Session) holderID() string {
	return s.identity + "#" + strconv.FormatUint(s.grants.Add(1), 10)
}

// closeTimeout bounds how long Close waits for the release of its leases.
const closeTimeout = 2 * time.Second

// Close ends every live Lease of the Session (cause recipe.ErrSessionClosed)
// and every waiting acquisition, clears the holderIdentity of every Lease
// it held (waiting at most 2 s; a Lease not cleared by then is taken over
// by a contender once its duration has passed), stops the Session's
// goroutines and, for a Session made by Connect, closes its client's
// connections. It is idempotent and returns nil; later acquisitions return
// recipe.ErrSessionClosed.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	live := s.leases
	s.leases = nil
	s.mu.Unlock()
	s.life.Close()
	var wg sync.WaitGroup
	for l := range live {
		if l.end(recipe.ErrSessionClosed) {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
				defer cancel()
				if err := l.m.clear(ctx, l.id, l.record()); err != nil {
					s.log.Info("k8slease: clearing a Lease at close failed; a contender takes it over once its duration has passed",
						"lock", l.m.path, "error", err)
				}
			})
		}
	}
	wg.Wait()
	s.life.Wait()
	if s.conns != nil {
		s.conns.CloseAll()
	}
	if m := s.cfg.metrics; m != nil {
		m.SessionState(recipe.StateConnected, recipe.StateLost, recipe.ErrSessionClosed)
	}
	s.log.Debug("k8slease: session closed")
	return nil
}

// register records l as live, for Close, or reports false after Close.
func (s *Session) register(l *lease) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.leases[l] = struct{}{}
	return true
}

// forget drops l from the live grants.
func (s *Session) forget(l *lease) {
	s.mu.Lock()
	delete(s.leases, l)
	s.mu.Unlock()
}

// observe records that the Lease of path was seen as cur at now (nil: it
// does not exist) and returns when this Session may take it: now for a
// Lease with no holder; else D after the first time this Session saw its
// current version, D being the duration written in it and at least this
// Session's own. Only a change of version (resourceVersion) restarts the
// count; the times written in the Lease are never compared with our clock.
//
// The deletion of a Lease that this Session last saw held is one more
// version: it counts as held until D (that version's) after this Session
// first saw it gone. The holder's newest renewal was sent before the
// delete, so its context has ended by then (its deadline is 2D/3 after
// that send), even when its watch event is late. A Lease never seen held
// (or last seen free) and found absent is free at once: nothing tells a
// Lease deleted under a holder from one never created (see doc.go).
func (s *Session) observe(path string, cur *coordv1.Lease, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.seen[path]
	switch {
	case cur == nil && o == nil, cur != nil && holderOf(cur) == "":
		delete(s.seen, path) // free: nothing to count
		return now
	case cur == nil:
		if o.rv != rvDeleted {
			o = &observation{rv: rvDeleted, at: now, duration: o.duration}
			s.seen[path] = o
		}
	case o == nil || o.rv != cur.ResourceVersion:
		// Never less than our own duration: an edit that shortens the
		// Lease's (someone with update rights) must not let us in while
		// its holder, if one of ours, still counts on its own.
		o = &observation{rv: cur.ResourceVersion, at: now, duration: max(durationOf(cur, s.cfg.duration), s.cfg.duration)}
		s.seen[path] = o
	}
	return o.at.Add(o.duration)
}

// rvDeleted is the version an observation gives a held Lease's deletion
// (a resourceVersion is never empty).
const rvDeleted = ""

// observation is the first sighting of one version of a held Lease, or of
// its deletion (rvDeleted).
type observation struct {
	rv       string
	at       time.Time // local, with its monotonic reading
	duration time.Duration
}
