package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/lockname"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/internal/notify"
	"github.com/zkrecipes/zkrecipes/recipe"
)

var _ recipe.HolderObserver = (*Mutex)(nil)

// Who holds the lock, as its server records it, and why a read never shows
// a state the server did not have:
//
//   - One read: a transaction, linearizable, at one revision R, of the
//     lock's first key by create revision (limit 1) and, with
//     WithLockDelay, of the lock-delay's record. Held, ID (the key's value)
//     and Token (its create revision) are fields of one key at R: they
//     belong together, whatever other clients do.
//   - The first key is the holder by the contenders' own rule: a contender
//     is granted when a read at one revision finds no lower key
//     (attempt.wait), and no other is granted while that key exists. A
//     hand-off (a Release's delete, an etcd lease's expiry) deletes the
//     holder's key, which makes the next key first in the same revision: a
//     read shows the old holder (the server has not let it go) or the next,
//     never a mix of both, nor "free" while a contender remains. A first key
//     whose Acquire has not returned yet is granted by the server's state
//     (its token is the Lease's; a caller that gives up deletes it: the next
//     state).
//   - With WithLockDelay a first key holds only once the record names it
//     (mark: before its Lease is returned): one serving a delay holds not.
//   - Reads are linearizable: none is older than the one before, and as new
//     keys get newer revisions, the first key's create revision only grows;
//     ObserveHolder also drops a state whose Token would go back (a restore
//     of the server from an older backup).

// Holder reads who holds the lock now, in one linearizable transaction of
// the first key under the lock's range by create revision, limit 1 (with
// WithLockDelay, the lock-delay's record too: give an observer the option
// its contenders have). ID is the key's value (WithIdentity, Proclaim),
// Token its create revision, Since the zero Time: etcd records no time.
// Transient errors are retried until ctx ends. Errors: ctx's cause,
// recipe.ErrSessionClosed, ErrBadHolder (with the state, its ID empty), a
// *recipe.OpError.
func (m *Mutex) Holder(ctx context.Context) (recipe.HolderState, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if ctx.Err() != nil {
		return recipe.HolderState{}, context.Cause(ctx)
	}
	ctx, cancel := m.s.life.Bind(ctx)
	defer cancel()
	r, err := m.readHolder(ctx)
	if err != nil {
		return recipe.HolderState{}, err
	}
	return r.st, r.bad
}

// holderRead is one read of the lock's holder: st at revision rev, key the
// holder's key ("" when free), bad a malformed identity (ErrBadHolder; st
// is the server's state then, with an empty ID).
type holderRead struct {
	st  recipe.HolderState
	rev int64
	key string
	bad error
}

// readHolder reads the lock's holder (see the comment at the top), retrying
// transient errors and unanswered tries until ctx ends.
func (m *Mutex) readHolder(ctx context.Context) (holderRead, error) {
	s := m.s
	ops := append([]clientv3.Op{clientv3.OpGet(m.dir, clientv3.WithFirstCreate()...)}, m.delayReads()...)
	b := loop.BackOff(retryFirst, retryMax)
	for {
		var resp *clientv3.TxnResponse
		unanswered, err := try(ctx, attemptTimeout(s.cfg.ttl), func(ctx context.Context) (err error) {
			resp, err = s.cli.Txn(ctx).Then(ops...).Commit()
			return err
		})
		switch {
		case err == nil:
			return m.parseHolder(resp)
		case ctx.Err() != nil:
			return holderRead{}, context.Cause(ctx)
		case unanswered:
			continue
		case !transient(err):
			return holderRead{}, opError("get", m.dir, err)
		}
		if loop.Pause(ctx, b, retryMax) != nil {
			return holderRead{}, context.Cause(ctx)
		}
	}
}

// parseHolder reads readHolder's answer. Nothing in it is trusted: a
// wrong answer is an error, a malformed identity is reported in bad.
func (m *Mutex) parseHolder(resp *clientv3.TxnResponse) (holderRead, error) {
	r := holderRead{rev: resp.Header.Revision}
	if len(resp.Responses) == 0 || resp.Responses[0].GetResponseRange() == nil {
		return r, &recipe.OpError{Op: "get", Path: m.dir, Err: errors.New("etcdlock: the server's answer holds no range")}
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return r, nil
	}
	kv := kvs[0]
	if kv.CreateRevision <= 0 || kv.CreateRevision > r.rev {
		return r, &recipe.OpError{Op: "get", Path: m.dir, Err: fmt.Errorf("%w: create revision %d at revision %d", ErrBadHolder, kv.CreateRevision, r.rev)}
	}
	if m.delay > 0 {
		if st := parseDelay(r.rev, resp.Responses, 1); st.held == nil || string(st.held.Value) != string(kv.Key) {
			return r, nil // first in line, not granted yet: serving the delay, or about to record its grant
		}
	}
	r.key = string(kv.Key)
	r.st = recipe.HolderState{Held: true, Holder: recipe.Holder{ID: string(kv.Value), Token: fence.Token(kv.CreateRevision)}}
	if why := checkStoredIdentity(kv.Value); why != "" {
		r.st.Holder.ID = ""
		r.bad = fmt.Errorf("%w: the holder with token %d published %s", ErrBadHolder, kv.CreateRevision, why)
	}
	return r, nil
}

// Proclaim publishes id as the identity of l, a live Lease of this lock
// granted on m's Session: one transaction that writes the key's value if
// its create revision is still l's Token, keeping its etcd lease. Transient
// errors are retried until ctx ends. Errors: recipe.ErrBadOption (id is
// not 1 to MaxIdentityLen bytes of printable UTF-8), recipe.ErrLeaseLost
// (l has ended, its key is gone, or it is not such a Lease), ctx's cause,
// a *recipe.OpError.
func (m *Mutex) Proclaim(ctx context.Context, l recipe.Lease, id string) error {
	if why := checkIdentity(id); why != "" {
		return fmt.Errorf("%w: etcdlock: Proclaim(%s): %s", recipe.ErrBadOption, lockname.Quote(id), why)
	}
	ll, ok := l.(*lease)
	if !ok || ll == nil || ll.s != m.s || !strings.HasPrefix(ll.key, m.dir) {
		return fmt.Errorf("%w: etcdlock: Proclaim: not a Lease of lock %s on this Session", recipe.ErrLeaseLost, lockname.Quote(m.name))
	}
	if lc := ll.Context(); lc.Err() != nil {
		return fmt.Errorf("%w: %w", recipe.ErrLeaseLost, context.Cause(lc))
	}
	var resp *clientv3.TxnResponse
	err := m.s.retry(ctx, ll.g, "put", ll.key, func(ctx context.Context) (err error) {
		resp, err = m.s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(ll.key), "=", ll.rev)).
			Then(clientv3.OpPut(ll.key, id, clientv3.WithIgnoreLease())).Commit()
		return err
	})
	switch {
	case err != nil && ll.g.ctx.Err() != nil:
		return fmt.Errorf("%w: %w", recipe.ErrLeaseLost, err)
	case err != nil:
		return err
	case !resp.Succeeded:
		return fmt.Errorf("%w: etcdlock: Proclaim: the key of the grant with token %d is gone", recipe.ErrLeaseLost, ll.rev)
	}
	return nil
}

// ObserveHolder delivers the lock's holder at once (as Holder reads it) and
// after each change: it reads, then watches the lock's range from the next
// revision, and reads again on an event that may change the holder. A
// compacted watch is read again at once, a failed one after a backoff
// (50 ms to 1 s, logged at Warn), a watch silent for a TTL checked by one
// read. Coalesced, consecutive states differ, Token never goes back. The
// channel closes when ctx ends (a nil ctx never ends) or the Session closes.
func (m *Mutex) ObserveHolder(ctx context.Context) <-chan recipe.HolderState {
	if ctx == nil {
		ctx = context.Background()
	}
	out := notify.NewLatest(recipe.HolderState.Equal)
	s := m.s
	octx, cancel := s.life.Bind(ctx)
	if !s.life.Go(func() {
		defer out.Close()
		defer cancel()
		o := &holderObserver{m: m, out: out}
		o.run(octx)
	}) {
		cancel()
		out.Close()
	}
	return out.C()
}

// holderObserver is one ObserveHolder: what it read and delivered.
type holderObserver struct {
	m    *Mutex
	out  *notify.Latest[recipe.HolderState]
	last holderRead  // the newest read
	top  fence.Token // the highest Token delivered
	bad  fence.Token // the Token of the last malformed identity logged
}

// run reads and follows the lock until ctx ends. A compacted watch is
// followed by a read at once, any other failure by one after a backoff,
// which starts again from its shortest wait after a watch that lasted
// longer than its longest.
func (o *holderObserver) run(ctx context.Context) {
	log := o.m.s.log.With("lock", o.m.name)
	b := loop.BackOff(retryFirst, retryMax)
	for {
		err := o.read(ctx)
		if err == nil {
			began := time.Now()
			err = o.follow(ctx)
			if time.Since(began) > retryMax {
				b.Reset()
			}
		}
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errCompacted):
			log.Debug("etcdlock: holder observer: compacted; reading the lock again", "err", err)
			continue
		}
		log.Warn("etcdlock: holder observer: reading the lock again", "err", err)
		if loop.Pause(ctx, b, retryMax) != nil {
			return
		}
	}
}

// read reads the holder and delivers it.
func (o *holderObserver) read(ctx context.Context) error {
	r, err := o.m.readHolder(ctx)
	if err != nil {
		return err
	}
	o.last = r
	if r.bad != nil && r.st.Holder.Token != o.bad {
		o.bad = r.st.Holder.Token
		o.m.s.log.Warn("etcdlock: holder observer: delivering the holder with an empty ID", "lock", o.m.name, "err", r.bad)
	}
	if !o.deliver(r.st) {
		o.m.s.log.Warn("etcdlock: holder observer: the holder's token went back (the server restored from a backup?); not delivered",
			"lock", o.m.name, "token", r.st.Holder.Token, "highest", o.top)
	}
	return nil
}

// follow watches the lock's range (and the lock-delay's record, with
// WithLockDelay) from the revision after the last read's, and reads again
// after each event that may change the holder, and after a TTL of silence.
// It returns when ctx ends (nil) or the watch or a read fails (why).
func (o *holderObserver) follow(ctx context.Context) error {
	m := o.m
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	from := clientv3.WithRev(o.last.rev + 1)
	keys := m.s.cli.Watch(wctx, m.dir, clientv3.WithPrefix(), from)
	var held, serving clientv3.WatchChan // nil: never ready
	if m.delay > 0 {
		held, serving = m.s.cli.Watch(wctx, m.held, from), m.s.cli.Watch(wctx, m.serving, from)
	}
	silent := time.NewTimer(silentWatchLimit(m.s.TTL()))
	defer silent.Stop()
	for {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case <-silent.C:
			if err := o.read(ctx); err != nil {
				return err
			}
			silent.Reset(silentWatchLimit(m.s.TTL()))
			continue
		case wr, ok = <-keys:
		case wr, ok = <-held:
		case wr, ok = <-serving:
		}
		if err := watchErr(m.dir, wr, ok); err != nil {
			return err
		}
		if o.changes(wr) {
			if err := o.read(ctx); err != nil {
				return err
			}
		}
		silent.Reset(silentWatchLimit(m.s.TTL()))
	}
}

// changes reports whether wr holds an event after the last read that may
// change the holder: any while the lock is free, one of the lock-delay's
// record, or one of the holder's key. A waiter's key can't: it was created
// after the holder's, and its deletion leaves the holder first.
func (o *holderObserver) changes(wr clientv3.WatchResponse) bool {
	for _, ev := range wr.Events {
		k := string(ev.Kv.Key)
		if ev.Kv.ModRevision > o.last.rev && (o.last.key == "" || k == o.last.key || !strings.HasPrefix(k, o.m.dir)) {
			return true
		}
	}
	return false
}

// deliver gives st to the reader (notify.Latest: coalesced, no repeat),
// unless its Token goes back (false).
func (o *holderObserver) deliver(st recipe.HolderState) bool {
	if st.Held && st.Holder.Token < o.top {
		return false
	}
	o.out.Offer(st)
	if st.Held {
		o.top = max(o.top, st.Holder.Token)
	}
	return true
}
