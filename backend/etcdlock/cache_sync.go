package etcdlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/internal/cachestore"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// cachePage is how many keys one range read of a cache's load returns: a
// large range is read in pages at one revision, so that a range over the
// cache's limits is refused before it is all in memory.
const cachePage = 1000

// Why a cache's watch was given up for a new read of its range.
var (
	errCacheCompacted = errors.New("etcdlock: cache watch: compacted")
	errCacheClosed    = errors.New("etcdlock: cache watch: closed")
	errCacheCanceled  = errors.New("etcdlock: cache watch: cancelled by the server")
	errCacheSilent    = errors.New("etcdlock: cache watch: silent while the range changed")
	errCacheBehind    = errors.New("etcdlock: cache: a read older than the cache's state")
)

// run loads the cache and follows its range until ctx ends (Close, the
// Session's Close) or an error that no retry cures, then stops the cache.
func (c *Cache) run(ctx context.Context) {
	b := loop.BackOff(retryFirst, retryMax)
	for {
		err := c.load(ctx)
		if err == nil {
			began := time.Now()
			err = c.follow(ctx)
			if time.Since(began) > retryMax {
				b.Reset() // it followed for a while: this failure is not the last one's sequel
			}
		}
		switch {
		case ctx.Err() != nil:
			c.stop(context.Cause(ctx))
			return
		case errors.Is(err, recipe.ErrCacheFull):
			c.log.Warn("etcdlock: cache over its limits; it stops following", "err", err)
			c.stop(err)
			return
		case recipe.Permanent(err):
			c.log.Error("etcdlock: cache: reading the range failed for good; it stops following", "err", err)
			c.stop(err)
			return
		case errors.Is(err, errCacheCompacted):
			c.log.Debug("etcdlock: cache: compacted; reading the range again", "err", err)
			b.Reset()
			continue
		}
		c.log.Warn("etcdlock: cache: reading the range again", "err", err)
		if loop.Pause(ctx, b, retryMax) != nil {
			c.stop(context.Cause(ctx))
			return
		}
	}
}

// cacheRead is the cache's range as one read found it at revision rev.
type cacheRead struct {
	rev    int64
	nodes  map[string]recipe.Node // the held keys, by Node.Path
	bytes  int64
	unheld int
}

// load reads the range at one revision (retrying transient errors until
// ctx ends) and makes it the cache's state, publishing the differences.
func (c *Cache) load(ctx context.Context) error {
	b := loop.BackOff(retryFirst, retryMax)
	for {
		r, unanswered, err := c.read(ctx)
		switch {
		case err == nil:
			return c.replace(r)
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case errors.Is(err, recipe.ErrCacheFull):
			return err
		case unanswered:
			continue
		case errors.Is(err, rpctypes.ErrCompacted): // compacted between two pages: read at a newer revision
			b.Reset()
			continue
		case !transient(err):
			return opError("get", c.lo, err)
		}
		if err := loop.Pause(ctx, b, retryMax); err != nil {
			return err
		}
	}
}

// read reads the range in pages, the first linearizable and the others at
// its revision, and reports whether a page went unanswered in time.
func (c *Cache) read(ctx context.Context) (*cacheRead, bool, error) {
	r := &cacheRead{nodes: map[string]recipe.Node{}}
	from := c.lo
	for {
		opts := []clientv3.OpOption{clientv3.WithLimit(cachePage)}
		if c.hi != "" {
			opts = append(opts, clientv3.WithRange(c.hi))
		}
		if r.rev != 0 {
			opts = append(opts, clientv3.WithRev(r.rev))
		}
		var resp *clientv3.GetResponse
		unanswered, err := try(ctx, attemptTimeout(c.s.cfg.ttl), func(ctx context.Context) (err error) {
			resp, err = c.s.cli.Get(ctx, from, opts...)
			return err
		})
		if err != nil {
			return nil, unanswered, err
		}
		if r.rev == 0 {
			r.rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			p, held := c.path(string(kv.Key))
			if !held {
				r.unheld++
				continue
			}
			n := recipe.Node{Path: p, Data: kv.Value, Created: kv.CreateRevision, Modified: kv.ModRevision}
			r.nodes[p] = n
			r.bytes += cachestore.Size(n)
			if err := c.full(len(r.nodes), r.bytes); err != nil {
				return nil, false, err
			}
		}
		if !resp.More || c.hi == "" || len(resp.Kvs) == 0 {
			return r, false, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// replace makes r the cache's state and publishes how it differs from the
// state held (all of it as NodeCreated, then CacheInitialized, at the first
// load), every event at r's revision, as one step: Snapshot sees the state
// before or r. A key whose incarnation (Created) is the one held and whose
// Modified is not newer is left as held: the events never go back.
func (c *Cache) replace(r *cacheRead) error {
	if rev := c.store.Rev(); r.rev < rev {
		return fmt.Errorf("%w: revision %d, the cache's %d", errCacheBehind, r.rev, rev)
	}
	c.store.SetConsistent(false, r.rev)
	var chs []cacheChange
	for _, p := range c.store.Paths() {
		if _, ok := r.nodes[p]; !ok {
			chs = append(chs, cacheChange{node: recipe.Node{Path: p}, gone: true, rev: r.rev})
		}
	}
	for _, n := range r.nodes {
		chs = append(chs, cacheChange{node: n, rev: r.rev})
	}
	c.commit(chs)
	c.unheld.Store(int64(r.unheld))
	if err := c.store.Err(); err != nil {
		return err
	}
	c.store.SetConsistent(true, r.rev)
	return nil
}

// cacheChange is a held key's state at revision rev: node, or absent
// (gone; node.Path alone set).
type cacheChange struct {
	node recipe.Node
	gone bool
	rev  int64
	grow int64 // what it adds to the bytes held (commit's)
}

// commit gives the store chs, the changes of one revision, in an order in
// which no state between the one held and the one after them is over the
// limits unless one of those two is: the deletions first, then the puts
// by how much they grow the bytes held (those that shrink it first), each
// group by path. (etcd's order within one revision, a transaction's, could
// put a key before it deletes another and stop a cache at its limit.)
func (c *Cache) commit(chs []cacheChange) {
	for i := range chs {
		ch := &chs[i]
		if ch.gone {
			continue
		}
		ch.grow = cachestore.Size(ch.node)
		if old, ok := c.store.Get(ch.node.Path); ok {
			ch.grow -= cachestore.Size(old)
		}
	}
	slices.SortFunc(chs, func(a, b cacheChange) int {
		switch {
		case a.gone != b.gone:
			if a.gone {
				return -1
			}
			return 1
		case a.grow != b.grow:
			return cmp.Compare(a.grow, b.grow)
		}
		return strings.Compare(a.node.Path, b.node.Path)
	})
	for _, ch := range chs {
		if ch.gone {
			c.store.Delete(ch.node.Path, ch.rev)
		} else {
			c.store.Put(ch.node, ch.rev)
		}
	}
}

// follow watches the range from the revision after the cache's, applying
// each watch response whole, until ctx ends (nil) or the watch does not do
// any more (why). A watch silent for a while is checked by one read
// (unchanged), as a Group's watch is: after a TTL, and a TTL more per page
// of keys in the range, so that the server reads at most about a page of
// keys per TTL for it.
func (c *Cache) follow(ctx context.Context) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRev(c.store.Rev() + 1), clientv3.WithProgressNotify()}
	if c.hi != "" {
		opts = append(opts, clientv3.WithRange(c.hi))
	}
	ch := c.s.cli.Watch(wctx, c.lo, opts...)
	limit := func() time.Duration {
		return silentWatchLimit(c.s.TTL()) * time.Duration(1+(int64(c.store.Len())+c.unheld.Load())/cachePage)
	}
	silent := time.NewTimer(limit())
	defer silent.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case wr, ok := <-ch:
			switch {
			case !ok:
				return errCacheClosed
			case wr.CompactRevision != 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted):
				return fmt.Errorf("%w at revision %d", errCacheCompacted, wr.CompactRevision)
			case wr.Err() != nil:
				return opError("watch", c.lo, wr.Err())
			case wr.Canceled:
				return errCacheCanceled
			}
			if err := c.apply(wr); err != nil {
				return err
			}
		case <-silent.C:
			if err := c.unchanged(ctx); err != nil {
				return err
			}
		}
		silent.Reset(limit())
	}
}

// apply applies one watch response (every event of the revisions it
// holds) as one step, Snapshot seeing the state before it or after it,
// and publishes its events, each at its revision; a progress notification
// advances the cache's revision. A state over the limits stops the store:
// the error matches recipe.ErrCacheFull.
func (c *Cache) apply(wr clientv3.WatchResponse) error {
	if wr.IsProgressNotify() {
		c.store.SetConsistent(true, wr.Header.Revision) // a synced watch: nothing of the range changed up to it
		return nil
	}
	if len(wr.Events) == 0 {
		return nil
	}
	var chs []cacheChange
	for _, ev := range wr.Events {
		if ch, ok := c.change(ev); ok {
			chs = append(chs, ch)
		}
	}
	last := wr.Events[len(wr.Events)-1].Kv.ModRevision
	if len(chs) == 0 { // keys the cache does not hold
		c.store.SetConsistent(true, last)
		return nil
	}
	c.store.SetConsistent(false, 0) // 0: each event's revision is its own
	for i := 0; i < len(chs); {
		j := i + 1
		for j < len(chs) && chs[j].rev == chs[i].rev {
			j++
		}
		c.commit(chs[i:j])
		i = j
	}
	if err := c.store.Err(); err != nil {
		return err
	}
	c.store.SetConsistent(true, last)
	return nil
}

// change returns the change of a held key that a watch event makes, if
// any, and counts the keys of the range the cache does not hold.
func (c *Cache) change(ev *clientv3.Event) (cacheChange, bool) {
	p, held := c.path(string(ev.Kv.Key))
	switch {
	case !held && ev.Type == mvccpb.DELETE:
		c.unheld.Add(-1)
		return cacheChange{}, false
	case !held:
		if ev.Kv.CreateRevision == ev.Kv.ModRevision {
			c.unheld.Add(1)
		}
		return cacheChange{}, false
	case ev.Type == mvccpb.DELETE:
		return cacheChange{node: recipe.Node{Path: p}, gone: true, rev: ev.Kv.ModRevision}, true
	}
	n := recipe.Node{Path: p, Data: ev.Kv.Value, Created: ev.Kv.CreateRevision, Modified: ev.Kv.ModRevision}
	return cacheChange{node: n, rev: n.Modified}, true
}

// unchanged checks, with one read of two small answers, that the range
// holds as many keys as the cache accounts for and none written after the
// cache's revision (the newest key by mod revision, keys only: a count
// with WithMinModRev would not do, as etcd counts the whole range whatever
// the filter); otherwise the watch missed a change (or is about to deliver
// it): errCacheSilent, and the range is read again.
func (c *Cache) unchanged(ctx context.Context) error {
	keys, rev := c.accounted()
	return c.rangeHolds(ctx, keys, rev)
}

// accounted returns how many keys of the range the cache accounts for
// (held or not) and its revision.
func (c *Cache) accounted() (keys, rev int64) {
	return int64(c.store.Len()) + c.unheld.Load(), c.store.Rev()
}

// rangeHolds is unchanged's check: whether the range holds keys keys and
// none written after rev (errCacheSilent if not).
func (c *Cache) rangeHolds(ctx context.Context, keys, rev int64) error {
	var rng []clientv3.OpOption
	if c.hi != "" {
		rng = append(rng, clientv3.WithRange(c.hi))
	}
	count := slices.Concat(rng, []clientv3.OpOption{clientv3.WithCountOnly()})
	newest := slices.Concat(rng, []clientv3.OpOption{clientv3.WithKeysOnly(), clientv3.WithLimit(1),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend)})
	var resp *clientv3.TxnResponse
	_, err := try(ctx, attemptTimeout(c.s.cfg.ttl), func(ctx context.Context) (err error) {
		resp, err = c.s.cli.Txn(ctx).Then(clientv3.OpGet(c.lo, count...), clientv3.OpGet(c.lo, newest...)).Commit()
		return err
	})
	if err != nil {
		return err
	}
	n, last := resp.Responses[0].GetResponseRange().Count, resp.Responses[1].GetResponseRange().Kvs
	if n != keys || len(last) > 0 && last[0].ModRevision > rev {
		return errCacheSilent
	}
	return nil
}
