package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Mutex is a distributed exclusive lock on etcd. It implements recipe.Lock:
// each Acquire or TryAcquire call is an independent contender with its own
// key (not reentrant), grants are FIFO, and every grant is a recipe.Lease
// with a fencing token. A Mutex holds no state beyond its name and Session;
// it is safe for concurrent use.
type Mutex struct {
	s    *Session
	name string
	dir  string          // the range prefix of the lock's keys
	rep  *grant.Reporter // where its leases report their loss

	delay         time.Duration // WithLockDelay's; 0: none
	held, serving string        // the lock-delay's keys (delay.go)
}

var _ recipe.Lock = (*Mutex)(nil)

// New returns the lock named name on s; its contenders' keys are
// <prefix>/<name>/_lock_<32 random hex digits>. A name is what every
// backend takes, of at most MaxNameLen bytes, and no element of it (part
// between "/") starts with "_lock_" or "_member_" (reserved for Group's
// keys); a leading "/" is dropped. Another name returns a *NameError
// (matching ErrInvalidName and recipe.ErrInvalidPath), nothing sent to the
// server (see Names in the package documentation).
// Options (nil ones are skipped): WithLockDelay; a bad one returns an error
// matching recipe.ErrBadOption.
func New(s *Session, name string, opts ...MutexOption) (*Mutex, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil Session", recipe.ErrBadOption)
	}
	if err := CheckName(name); err != nil {
		return nil, err
	}
	rep := &grant.Reporter{Log: s.log, Metrics: s.cfg.metrics, Backend: "etcdlock", Kind: kind, Dir: name}
	m := &Mutex{s: s, name: name, dir: lockDir(s.prefix, name), rep: rep}
	for _, o := range opts {
		if o != nil {
			o(m)
		}
	}
	if err := grant.CheckDelay("etcdlock.WithLockDelay", m.delay); err != nil {
		return nil, err
	}
	m.delayKeys()
	return m, nil
}

// CheckName returns the error New returns for name (a *NameError matching
// ErrInvalidName and recipe.ErrInvalidPath), or nil if New accepts it: a
// program can refuse a bad name before it connects.
func CheckName(name string) error { return nameRules.Check(name) }

// Name returns the lock's name as given to New.
func (m *Mutex) Name() string { return m.name }

// Acquire waits until the caller holds the lock, ctx ends, or the Session's
// lease is lost (recipe.ErrSessionLost, also matching recipe.ErrSuspended
// when the lease was presumed lost) or closed (recipe.ErrSessionClosed). It
// puts a key of its own under the Session's etcd lease and watches the
// nearest lower key only; it returns ErrNodeDeleted if its key is deleted
// by someone else while it waits. On any error its key is deleted before
// it returns, whatever ctx has become, or goes with the etcd lease (see
// Acquire in the package documentation).
func (m *Mutex) Acquire(ctx context.Context) (recipe.Lease, error) { return m.acquire(ctx, true) }

// TryAcquire returns a Lease if the lock is free, or an error matching
// recipe.ErrLocked if any key of the lock exists (a holder, or waiters that a
// holder has just left). It is one transaction that puts a key only if the
// lock has none, so a refusal leaves nothing behind and costs one request.
// With WithLockDelay it also refuses while a lock-delay is served or due;
// a TryAcquire that finds one due (nobody in line serves it) starts it,
// so the lock is free again d later. Other errors as for Acquire.
func (m *Mutex) TryAcquire(ctx context.Context) (recipe.Lease, error) {
	return m.acquire(ctx, false)
}

// kind is the Metrics kind of a Mutex's events.
const kind = "lock"

// acquire is Acquire (wait) or TryAcquire, reported to Metrics.
func (m *Mutex) acquire(ctx context.Context, wait bool) (recipe.Lease, error) {
	a := grant.Begin(m.s.cfg.metrics, kind, m.name)
	l, err := m.contend(ctx, wait)
	a.Done(l, err)
	return l, err
}

// contend is one acquisition: a key of its own, then, if wait, the wait for
// the keys below it to go.
func (m *Mutex) contend(ctx context.Context, wait bool) (recipe.Lease, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	g, err := m.s.current(ctx)
	if err != nil {
		return nil, err
	}
	a := &attempt{m: m, g: g, key: m.dir + newGUID()}

	// The put is never abandoned while in flight: a put the server applies
	// after we gave up would leave a key that blocks the lock while the
	// lease lives. A caller who stops waiting still waits for the put's
	// answer and the delete of its key, as any failed Acquire does, unless
	// the server can't be reached (see abandon).
	created := make(chan createResult, 1)
	failing := make(chan struct{})
	if !m.s.life.Go(func() { created <- a.create(wait, failing) }) {
		return nil, recipe.ErrSessionClosed
	}
	var r createResult
	select {
	case r = <-created:
	case <-ctx.Done():
		a.abandon(created, failing)
		return nil, context.Cause(ctx)
	}
	switch {
	case r.err != nil:
		a.discard() // an earlier try's put may have been applied, its answer lost (a.rev 0: see deleteOwned)
		return nil, r.err
	case r.rev == 0:
		if err := m.tryRefused(ctx, g, r); err != nil {
			return nil, err
		}
		return nil, recipe.ErrLocked
	}
	a.rev, a.st = r.rev, r.st
	if r.first != r.rev {
		if !wait {
			a.discard()
			return nil, recipe.ErrLocked
		}
		if err := m.waitFirst(ctx, a); err != nil {
			a.discard()
			return nil, err
		}
	}
	var served time.Duration
	if m.delay > 0 && !r.marked && !wait { // its record was overwritten: TryAcquire never waits
		a.discard()
		return nil, recipe.ErrLocked
	}
	if m.delay > 0 && !r.marked {
		var err error
		if served, err = a.serveDelay(ctx, a.st); err != nil {
			a.discard()
			return nil, err
		}
	}
	if ctx.Err() != nil { // granted as the caller gave up
		a.discard()
		return nil, context.Cause(ctx)
	}
	return a.grant(ctx, served)
}

// waitFirst is attempt.wait, reported to Metrics.Waiting.
func (m *Mutex) waitFirst(ctx context.Context, a *attempt) error {
	mx := m.s.cfg.metrics
	if mx == nil {
		return a.wait(ctx)
	}
	mx.Waiting(kind, m.name, +1)
	defer mx.Waiting(kind, m.name, -1)
	return a.wait(ctx)
}

// attempt is one contender: a key of its own under one etcd lease.
type attempt struct {
	m   *Mutex
	g   *generation
	key string
	rev int64      // the key's create revision, once known
	st  delayState // the lock-delay's keys when it found itself first (WithLockDelay)
}

// createResult is the outcome of attempt.create: rev is the key's create
// revision (0: no key, the lock was taken for TryAcquire), first the create
// revision of the lock's first key; with the lock-delay, marked reports
// that the same transaction recorded the grant as held, and st is what it
// read of the lock-delay's keys.
type createResult struct {
	rev, first int64
	marked     bool
	st         delayState
	err        error
}

// create puts the attempt's key and reads the lock's first key in one
// transaction. For Acquire the put is conditional on the key not existing;
// for TryAcquire, on the lock having no key at all. The transaction is
// idempotent (a retry finds the key a lost answer's put made, in its else
// branch), so it is retried after every transient error until it gets an
// answer, the lease is lost or the Session closes. failing is closed at the
// first transient error answered (not at a try left unanswered, which a
// slow server may still apply).
func (a *attempt) create(wait bool, failing chan struct{}) createResult {
	ctx, cancel := a.m.s.life.Bind(a.g.ctx)
	defer cancel()
	cond, then := a.createOps(wait)
	reads := append([]clientv3.Op{clientv3.OpGet(a.m.dir, clientv3.WithFirstCreate()...)}, a.m.delayReads()...)
	var resp *clientv3.TxnResponse
	txn := func(ctx context.Context) (err error) {
		resp, err = a.m.s.cli.Txn(ctx).If(cond...).
			Then(append(then, reads...)...).
			Else(append([]clientv3.Op{clientv3.OpGet(a.key)}, reads...)...).Commit()
		return err
	}
	b := loop.BackOff(retryFirst, retryMax)
	closed := false // failing
	for {
		unanswered, err := try(ctx, attemptTimeout(a.g.ttl), txn)
		if err == nil {
			return a.parseCreate(resp, len(then))
		}
		switch {
		case unanswered: // sent to a silent member, most likely: send it again
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			a.g.lose(fmt.Errorf("%w: etcd lease %x is gone (a put under it was refused)", recipe.ErrSessionLost, int64(a.g.id)))
			return createResult{err: lostError(context.Cause(a.g.ctx))}
		case ctx.Err() != nil:
			// The lease is lost or the Session closed; a key the put may
			// have made goes with the lease.
			return createResult{err: lostError(context.Cause(ctx))}
		case !transient(err):
			return createResult{err: opError("put", a.key, err)}
		}
		a.m.s.log.Debug("etcdlock: put failed, retrying", "key", a.key, "error", err)
		if !unanswered && !closed {
			// An error the server (or the transport) answered: it can't be
			// reached. An unanswered try may still be applied, and its
			// retry finds the key: an abandoning caller waits for that.
			closed = true
			close(failing)
		}
		if loop.Pause(ctx, b, retryMax) != nil {
			return createResult{err: lostError(context.Cause(ctx))}
		}
	}
}

// parseCreate reads create's answer; nthen is the number of writes of its
// Then branch, which come before its reads.
func (a *attempt) parseCreate(resp *clientv3.TxnResponse, nthen int) createResult {
	var r createResult
	i := 1 // the first read of the Else branch
	if resp.Succeeded {
		r.rev = resp.Header.Revision // a transaction's writes all have its revision
		i = nthen
		if nthen > 1 { // the grant recorded as held (TryAcquire), or maybe (Acquire's nested transaction)
			t := resp.Responses[1].GetResponseTxn()
			r.marked = t == nil || t.Succeeded
		}
	} else if own := resp.Responses[0].GetResponseRange().Kvs; len(own) > 0 {
		// An earlier try of ours was applied and its answer lost.
		if clientv3.LeaseID(own[0].Lease) != a.g.id {
			return createResult{err: fmt.Errorf("etcdlock: key %s exists under another lease (%x)", a.key, own[0].Lease)}
		}
		r.rev = own[0].CreateRevision
	}
	if kvs := resp.Responses[i].GetResponseRange().Kvs; len(kvs) > 0 {
		r.first = kvs[0].CreateRevision
	}
	r.st = parseDelay(resp.Header.Revision, resp.Responses, i+1)
	if r.rev != 0 && r.st.held != nil && string(r.st.held.Value) == a.key {
		r.marked = true // an earlier try of ours recorded it, its answer lost
	}
	return r
}

// wait returns when the attempt's key is the lock's first (nil), or why it
// can't become so: ctx's cause, the lease lost, ErrNodeDeleted. Each round
// reads the attempt's own key and the nearest lower key at one revision,
// then watches, from the next revision, the deletion of that lower key (and
// of its own key), and reads again after any event: nothing is inferred
// from an event alone.
func (a *attempt) wait(ctx context.Context) error {
	s := a.m.s
	ctx, cancel := s.life.Bind(ctx)
	defer cancel()
	ctx, cancel2 := a.g.bind(ctx)
	defer cancel2()
	lower := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(a.rev-1), clientv3.WithKeysOnly())
	b := loop.BackOff(retryFirst, retryMax)
	var resp *clientv3.TxnResponse
	read := func(ctx context.Context) (err error) {
		resp, err = s.cli.Txn(ctx).Then(append([]clientv3.Op{clientv3.OpGet(a.key, clientv3.WithKeysOnly()),
			clientv3.OpGet(a.m.dir, lower...)}, a.m.delayReads()...)...).Commit()
		return err
	}
	for {
		unanswered, err := try(ctx, attemptTimeout(a.g.ttl), read)
		if err != nil {
			if done := a.stopped(ctx); done != nil {
				return done
			}
			if !unanswered && !transient(err) {
				return opError("get", a.m.dir, err)
			}
			if loop.Pause(ctx, b, retryMax) != nil {
				return a.stopped(ctx)
			}
			continue
		}
		b.Reset()
		if own := resp.Responses[0].GetResponseRange().Kvs; len(own) == 0 || own[0].CreateRevision != a.rev {
			a.g.gone(ctx)
			if done := a.stopped(ctx); done != nil {
				return done
			}
			return fmt.Errorf("%w: %s (deleted while waiting)", recipe.ErrNodeDeleted, a.key)
		}
		prev := resp.Responses[1].GetResponseRange().Kvs
		if len(prev) == 0 {
			a.st = parseDelay(resp.Header.Revision, resp.Responses, 2)
			return nil
		}
		if err := a.awaitDelete(ctx, string(prev[0].Key), resp.Header.Revision+1); err != nil {
			return err
		}
	}
}

// awaitDelete watches, from revision rev, the keys prev and the attempt's
// own, and returns nil at the first deletion of either, when the watch
// ends for another reason (compaction, no leader) or stays silent past
// silentWatchLimit: the caller reads again. It returns an error when ctx,
// the lease or the Session ends.
func (a *attempt) awaitDelete(ctx context.Context, prev string, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRev(rev), clientv3.WithFilterPut()}
	cli := a.m.s.cli
	prevCh, ownCh := cli.Watch(wctx, prev, opts...), cli.Watch(wctx, a.key, opts...)
	silent := time.NewTimer(silentWatchLimit(a.g.ttl))
	defer silent.Stop()
	select {
	case <-prevCh:
	case <-ownCh:
	case <-silent.C:
	case <-ctx.Done():
	case <-a.g.ctx.Done():
	}
	if done := a.stopped(ctx); done != nil {
		return done
	}
	return nil
}

// stopped returns why the attempt must stop waiting (its lease lost, the
// Session closed, ctx's cause) or nil.
func (a *attempt) stopped(ctx context.Context) error {
	switch {
	case a.g.ctx.Err() != nil:
		return lostError(context.Cause(a.g.ctx))
	case ctx.Err() != nil:
		return context.Cause(ctx)
	}
	return nil
}

// grant turns the attempt into a Lease, unless its etcd lease was lost
// meanwhile.
func (a *attempt) grant(ctx context.Context, served time.Duration) (recipe.Lease, error) {
	s := a.m.s
	if !s.life.Enter() {
		return nil, recipe.ErrSessionClosed
	}
	l := newLease(a, ctx)
	l.SetDelayServed(served)
	if !a.g.add(l) {
		s.life.Exit()
		return nil, lostError(context.Cause(a.g.ctx))
	}
	go func() {
		defer s.life.Exit()
		l.watchOwn()
	}()
	return l, nil
}

// abandon finishes an attempt whose caller stopped waiting while its put
// was in flight: it waits for the put's answer and deletes the key the put
// made (discard), so that the caller's error leaves nothing behind: a
// round trip gets no budget of its own (under load one can outlast any).
// The wait ends with the put's answer, the put's first transient error
// (the server can't be reached), the lease's end (a silent server: 2/3 of
// the TTL, and the key goes with the lease) or the cleanup timeout; what is
// left then goes on in the background: the key is deleted when the answer
// comes, or goes with the etcd lease.
func (a *attempt) abandon(created <-chan createResult, failing <-chan struct{}) {
	finish := func(r createResult) {
		if r.err != nil || r.rev != 0 { // on an error, an earlier try's put may have been applied
			a.rev = r.rev
			a.discard()
		}
	}
	t := time.NewTimer(a.g.cleanupTimeout())
	defer t.Stop()
	select {
	case r := <-created:
		finish(r)
		return
	case <-failing:
	case <-t.C:
	}
	a.m.s.life.Go(func() { finish(<-created) })
}

// discard deletes the attempt's key (its incarnation a.rev only) after a
// failed acquisition: see deleteOwned; what that could not confirm goes on
// in the background (deleteLater). A key whose etcd lease is lost is left
// to go with the lease (the server expires it, or the Session revokes it).
func (a *attempt) discard() {
	also := a.m.releaseOps(a.key) // a grant recorded as held was never handed out
	if a.g.ctx.Err() == nil && a.m.s.deleteOwned(context.Background(), a.g, a.key, a.rev, also...) != nil {
		a.m.s.deleteLater(a.g, a.key, a.rev, also...)
	}
}
