package etcdlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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

// errCacheBehind is a read of the range older than the cache's state.
var errCacheBehind = errors.New("etcdlock: cache: a read older than the cache's state")

// run loads the cache and follows its range (its follower) until ctx ends
// (Close, the Session's Close) or an error that no retry cures, then stops
// the cache.
func (c *Cache) run(ctx context.Context) {
	err := c.follower().run(ctx)
	switch {
	case err == nil:
		c.stop(context.Cause(ctx))
		return
	case errors.Is(err, recipe.ErrCacheFull):
		c.log.Warn("etcdlock: cache over its limits; it stops following", "err", err)
	default:
		c.log.Error("etcdlock: cache: reading the range failed for good; it stops following", "err", err)
	}
	c.stop(err)
}

// follower returns the loop that loads the cache and follows its range,
// applying each watch response whole; the silent watch's check counts the
// keys the cache accounts for (accounted).
func (c *Cache) follower() *follower {
	return &follower{
		s: c.s, log: c.log, prefix: "etcdlock: cache: ", subject: "the range", key: c.lo, end: c.hi,
		read: func(ctx context.Context) (int64, error) {
			if err := c.load(ctx); err != nil {
				return 0, err
			}
			return c.store.Rev(), nil
		},
		apply: c.apply, expect: c.accounted,
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

// accounted returns how many keys of the range the cache accounts for
// (held or not) and its revision.
func (c *Cache) accounted() (keys, rev int64) {
	return int64(c.store.Len()) + c.unheld.Load(), c.store.Rev()
}
