package k8slease

import (
	"context"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Mutex is an exclusive lock on one Lease object. It implements
// recipe.Lock: each Acquire or TryAcquire call is an independent contender
// with a holder identity of its own (not reentrant), and every grant is a
// recipe.Lease with a fencing token. A Lease holds one holder and no queue:
// waiters are not served in order, and under steady contention one can
// lose every race (see Waiting in the package documentation). A Mutex
// holds no state beyond its name and Session; it is safe for concurrent
// use.
type Mutex struct {
	s         *Session
	namespace string
	name      string
	path      string // "namespace/name"
	rep       *grant.Reporter
}

var _ recipe.Lock = (*Mutex)(nil)

// New returns the lock on the Lease named name ("namespace/name", or a
// bare name in the Session's namespace: WithNamespace). The namespace must
// be a DNS label (RFC 1123: at most 63 bytes of a-z, 0-9 and "-", starting
// and ending with a letter or digit), the name a DNS subdomain (at most 253
// bytes of such labels joined by "."); otherwise New returns a *NameError
// matching ErrInvalidNamespace or ErrInvalidName (and recipe.ErrInvalidPath),
// and nothing is sent to the server. The Lease need not exist: the first
// grant creates it, and no Release deletes it.
func New(s *Session, name string) (*Mutex, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil Session", recipe.ErrBadOption)
	}
	ns, n, err := splitName(name, s.cfg.namespace)
	if err != nil {
		return nil, err
	}
	path := ns + "/" + n
	rep := &grant.Reporter{Log: s.log, Metrics: s.cfg.metrics, Backend: "k8slease", Kind: kind, Dir: path}
	return &Mutex{s: s, namespace: ns, name: n, path: path, rep: rep}, nil
}

// CheckName returns the error New returns for name with the namespace ns
// for a bare name (a *NameError), or nil if New accepts it: a program can
// refuse a bad name before it connects.
func CheckName(name, ns string) error {
	_, _, err := splitName(name, ns)
	return err
}

// Namespace returns the namespace of the lock's Lease.
func (m *Mutex) Namespace() string { return m.namespace }

// Name returns the name of the lock's Lease.
func (m *Mutex) Name() string { return m.name }

// kind is the Metrics kind of a Mutex's events.
const kind = "lock"

// Acquire waits until the caller holds the lock, ctx ends, or the Session
// is closed (recipe.ErrSessionClosed). It takes the Lease when it has no
// holder, and otherwise once the duration written in it has passed since
// this Session first saw its current version, with an update the API
// server applies only if the Lease has not changed since. A missing right
// is a *PermissionError (recipe.ErrNoPermission), a missing namespace
// ErrNoNamespace. On any error, a Lease that its update may have taken is
// given up before it returns (see Acquire in the package documentation).
func (m *Mutex) Acquire(ctx context.Context) (recipe.Lease, error) { return m.acquire(ctx, true) }

// TryAcquire returns a Lease if the lock is free: the Lease has no holder,
// does not exist (and was not last seen held by this Session, or was seen
// gone for the duration), or was seen by this Session unchanged for the
// duration written in it. Otherwise it returns an error matching
// recipe.ErrLocked at once, leaving nothing behind. Other errors as for
// Acquire.
func (m *Mutex) TryAcquire(ctx context.Context) (recipe.Lease, error) {
	return m.acquire(ctx, false)
}

// acquire is Acquire (wait) or TryAcquire, reported to Metrics.
func (m *Mutex) acquire(ctx context.Context, wait bool) (recipe.Lease, error) {
	a := grant.Begin(m.s.cfg.metrics, kind, m.path)
	err := m.checkRights(ctx)
	var l recipe.Lease
	if err == nil {
		l, err = m.contend(ctx, wait)
	}
	a.Done(l, err)
	return l, err
}

// leases is the client of the lock's namespace.
func (m *Mutex) leases() coordclient.LeaseInterface { return m.s.cli.Leases(m.namespace) }

// contend is one acquisition: read the Lease, take it if it is free or
// expired as this Session counts it, else (wait) watch it until that
// changes.
func (m *Mutex) contend(ctx context.Context, wait bool) (recipe.Lease, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	ctx, cancel := m.s.life.Bind(ctx)
	defer cancel()
	id := m.s.holderID()
	var w *leaseWatch
	defer func() { w.stop() }()
	waiting := false
	defer func() {
		if waiting && m.s.cfg.metrics != nil {
			m.s.cfg.metrics.Waiting(kind, m.path, -1)
		}
	}()
	var cur *coordv1.Lease
	known := false
	for {
		if !known {
			var err error
			if cur, err = m.read(ctx); err != nil {
				return nil, err
			}
		}
		now := time.Now()
		until := m.s.observe(m.path, cur, now)
		if !now.Before(until) {
			l, again, err := m.take(ctx, id, cur)
			if !again {
				return l, err
			}
			known = false
			continue
		}
		if !wait {
			return nil, lockedError(m.path, cur)
		}
		if !waiting && m.s.cfg.metrics != nil {
			m.s.cfg.metrics.Waiting(kind, m.path, +1)
		}
		waiting = true
		if w == nil {
			w = m.startWatch(ctx, versionOf(cur)) // nil on failure: the timers still wake us
		}
		var ended bool
		var err error
		cur, known, ended, err = w.next(ctx, until, pollEvery(m.s.cfg.duration))
		if err != nil {
			return nil, err
		}
		if ended {
			w.stop()
			w = nil
		}
	}
}

// pollEvery is how often a waiter reads the Lease even without a watch
// event: the backstop for a watch that went silent.
func pollEvery(d time.Duration) time.Duration { return max(d, 5*time.Second) }

// attemptTimeout bounds one try of a request: max(duration/6, 1 s). A
// request unanswered by then is taken as lost and its outcome found out.
func attemptTimeout(d time.Duration) time.Duration { return max(d/6, time.Second) }

// The retry waits of every request this package retries: from retryFirst,
// doubling up to retryMax, randomized (internal/loop).
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = time.Second
)

// read gets the Lease (nil if it does not exist), each try bounded by
// attemptTimeout, retrying transient errors until ctx ends.
func (m *Mutex) read(ctx context.Context) (*coordv1.Lease, error) {
	b := loop.BackOff(retryFirst, retryMax)
	for {
		tctx, cancel := context.WithTimeout(ctx, attemptTimeout(m.s.cfg.duration))
		cur, err := m.leases().Get(tctx, m.name, metav1.GetOptions{})
		cancel()
		switch {
		case err == nil:
			return cur, nil
		case apierrors.IsNotFound(err):
			return nil, nil
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case !transient(err):
			return nil, opError("get", m.path, err)
		}
		m.s.log.Debug("k8slease: get failed, retrying", "lock", m.path, "error", err)
		if loop.Pause(ctx, b, retryMax) != nil {
			return nil, context.Cause(ctx)
		}
	}
}

// take writes a grant to id over cur (creating the Lease when cur is nil)
// and returns the Lease, or again when the write was refused because the
// Lease changed (read it and decide again). The write is not bound to ctx:
// an update abandoned in flight could still take the Lease, so its answer
// (or its absence, after attemptTimeout) is always awaited and its outcome
// settled.
func (m *Mutex) take(ctx context.Context, id string, cur *coordv1.Lease) (_ recipe.Lease, again bool, _ error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout(m.s.cfg.duration))
	defer cancel()
	sent := time.Now()
	var obj *coordv1.Lease
	var err error
	if cur == nil {
		obj, err = m.leases().Create(wctx, newRecord(m.namespace, m.name, id, m.s.cfg.duration, sent), metav1.CreateOptions{})
	} else {
		obj, err = m.leases().Update(wctx, taken(cur, id, m.s.cfg.duration, sent), metav1.UpdateOptions{})
	}
	switch {
	case err == nil:
		return m.grant(ctx, id, obj, sent)
	case cur == nil && apierrors.IsNotFound(err):
		// A create answered "not found": the namespace does not exist.
		return nil, false, noNamespace(m, "create", err)
	case apierrors.IsForbidden(err):
		verb := "update"
		if cur == nil {
			verb = "create"
		}
		return nil, false, &recipe.OpError{Op: "take", Path: m.path, Err: m.refused(verb, err)}
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err):
		if ctx.Err() != nil {
			return nil, false, context.Cause(ctx)
		}
		return nil, true, nil // changed since read: read it again
	case !transient(err):
		return nil, false, opError("take", m.path, err)
	}
	// The write may or may not have been applied: the Lease names id if it was.
	m.s.log.Debug("k8slease: take unanswered, reading the outcome", "lock", m.path, "error", err)
	rctx, rcancel := m.cleanupContext(ctx)
	defer rcancel()
	got, rerr := m.read(rctx)
	switch {
	case rerr != nil:
		m.clearLater(id)
		if ctx.Err() != nil {
			return nil, false, context.Cause(ctx)
		}
		return nil, false, opError("take", m.path, err)
	case holderOf(got) == id:
		return m.grant(ctx, id, got, sent)
	case ctx.Err() != nil:
		return nil, false, context.Cause(ctx)
	}
	return nil, true, nil
}

// grant turns the Lease obj, just written to name id (a write sent at
// sent), into a recipe.Lease, unless the caller gave up, the Session
// closed or ownership is in doubt already (a write answered after the
// ownership deadline: again): it then gives obj up again.
func (m *Mutex) grant(ctx context.Context, id string, obj *coordv1.Lease, sent time.Time) (_ recipe.Lease, again bool, err error) {
	token, terr := tokenOf(obj.ResourceVersion)
	switch {
	case terr != nil:
		err = opError("take", m.path, terr)
	case ctx.Err() != nil:
		err = context.Cause(ctx)
	default:
		l := newLease(ctx, m, id, obj, token, sent)
		switch l.start() {
		case nil:
			return l, false, nil
		case errLate:
			again = true
		default:
			err = recipe.ErrSessionClosed
		}
	}
	cctx, cancel := m.cleanupContext(ctx)
	defer cancel()
	if m.clear(cctx, id, obj) != nil {
		m.clearLater(id)
	}
	return nil, again, err
}
