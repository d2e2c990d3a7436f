package etcdlock

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/internal/cachestore"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Cache is a local copy of one key, of it and the keys one segment below it,
// or of it and every key below it (recipe.Cache; Curator's CuratorCache on
// etcd). A goroutine reads the cache's key range at one revision, then
// follows it with an etcd watch from the next revision, applying each watch
// response whole: what the cache holds is always the range as etcd held it
// at one revision (Snapshot's Rev), never a state in between. Compacted,
// cancelled, closed and silent watches are recovered, and the keys this
// package reserves are held like any key (see Caches and values in the
// package documentation). A Cache is safe for concurrent use; Close it when
// done.
type Cache struct {
	s      *Session
	name   string
	mode   recipe.CacheMode
	root   string // the root's key
	lo, hi string // the range read and watched: [lo, hi), or the key lo alone when hi is ""
	store  *cachestore.Store
	log    *slog.Logger
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the cache's goroutine has ended

	// unheld counts the keys of the range that the cache does not hold
	// (siblings, deeper keys), for the silent watch's check: the cache's
	// goroutine writes it; atomic for a test's reads.
	unheld atomic.Int64
}

var _ recipe.Cache = (*Cache)(nil)

// CacheOption configures NewCache.
type CacheOption func(*cacheConfig)

// cacheConfig is what the cache options set.
type cacheConfig struct {
	mode     recipe.CacheMode
	maxNodes int
	maxBytes int64
}

// WithCacheMode sets what a Cache holds (default recipe.CacheTree): the
// root's key alone (recipe.CacheNode), it and the keys one segment below it
// (recipe.CacheChildren), or it and every key below it (recipe.CacheTree).
// Another value makes NewCache fail with an error matching
// recipe.ErrBadOption.
func WithCacheMode(m recipe.CacheMode) CacheOption {
	return func(c *cacheConfig) { c.mode = m }
}

// WithCacheLimits bounds what a Cache holds: at most nodes keys and bytes
// bytes of paths (Node.Path) and data; a cache whose range needs more stops
// with recipe.ErrCacheFull. A 0 keeps the default of that limit
// (recipe.DefaultCacheMaxNodes, recipe.DefaultCacheMaxBytes); a negative
// one makes NewCache fail with an error matching recipe.ErrBadOption.
func WithCacheLimits(nodes int, bytes int64) CacheOption {
	return func(c *cacheConfig) {
		if nodes != 0 {
			c.maxNodes = nodes
		}
		if bytes != 0 {
			c.maxBytes = bytes
		}
	}
}

// NewCache returns a cache of the key <prefix>/<name> of s (and the keys
// below it, by WithCacheMode) and returns at once: its goroutine loads it
// (Snapshot and Listen wait for that) and then follows it until Close, the
// Session's Close or an error it cannot retry (Err). Node.Path is a key
// without the Session's prefix and the "/" after it ("jobs/a" for
// <prefix>/jobs/a). A name follows the lock names' rules (CheckName): an
// invalid one returns a *NameError matching ErrInvalidName and
// recipe.ErrInvalidPath; a nil s or a bad option, an error matching
// recipe.ErrBadOption; a closed s, recipe.ErrSessionClosed.
func NewCache(s *Session, name string, opts ...CacheOption) (*Cache, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil Session", recipe.ErrBadOption)
	}
	if err := CheckName(name); err != nil {
		return nil, err
	}
	cfg := cacheConfig{mode: recipe.CacheTree, maxNodes: recipe.DefaultCacheMaxNodes, maxBytes: recipe.DefaultCacheMaxBytes}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	switch {
	case cfg.mode != recipe.CacheTree && cfg.mode != recipe.CacheChildren && cfg.mode != recipe.CacheNode:
		return nil, fmt.Errorf("%w: etcdlock: WithCacheMode(%d): not a recipe.CacheMode", recipe.ErrBadOption, cfg.mode)
	case cfg.maxNodes < 0 || cfg.maxBytes < 0:
		return nil, fmt.Errorf("%w: etcdlock: WithCacheLimits(%d, %d): need limits of 0 (the default) or more", recipe.ErrBadOption, cfg.maxNodes, cfg.maxBytes)
	}
	root := s.prefix + "/" + strings.TrimPrefix(name, "/")
	c := &Cache{
		s: s, name: name, mode: cfg.mode, root: root, lo: root, store: cachestore.New(cfg.maxNodes, cfg.maxBytes),
		log: s.log.With("cache", name), done: make(chan struct{}),
	}
	if cfg.mode != recipe.CacheNode {
		c.hi = clientv3.GetPrefixRangeEnd(root + "/") // from root through root/\xff...: root's siblings "root-x" are in it too, and filtered out
	}
	ctx, cancel := s.life.Bind(context.Background())
	ctx, c.cancel = context.WithCancelCause(ctx)
	if !s.life.Go(func() {
		defer close(c.done)
		defer cancel()
		c.run(ctx)
	}) {
		cancel()
		c.cancel(nil)
		return nil, recipe.ErrSessionClosed
	}
	return c, nil
}

// Name returns the cache's name as given to NewCache.
func (c *Cache) Name() string { return c.name }

// Get returns the node whose Node.Path is path as the cache holds it now
// (nothing once the cache stopped), without asking the server. Its Data
// must not be modified.
func (c *Cache) Get(path string) (recipe.Node, bool) {
	if c.store.Err() != nil { // the store keeps its nodes when it stops; a stopped cache holds none
		return recipe.Node{}, false
	}
	return c.store.Get(path)
}

// Snapshot waits until the cache is loaded and returns its content, the
// range as etcd held it at revision Rev, sorted by Path, never a part of
// a watch response or of a new read; it does not wait for the server
// after that (a cache recovering from a compaction returns the last state
// it held). The Nodes' Data must not be modified. Errors: ctx's cause (a
// nil ctx never ends), the error that stopped the cache (Err).
func (c *Cache) Snapshot(ctx context.Context) (recipe.CacheSnapshot, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	return c.store.Snapshot(ctx)
}

// Listen delivers the cache's content as NodeCreated events (sorted by
// Path, Rev the cache's revision), then CacheInitialized once it is loaded,
// then every change in etcd's order: one event per key whose state a watch
// response or a new read changed (Rev the event's revision, or the read's).
// Each listener has its own unbounded queue, read by a goroutine of its
// own: a slow reader never blocks the cache, but holds what it has not
// read. The channel closes, dropping what is queued, when ctx ends (a nil
// ctx never ends), the cache is closed, or it stops (Err); it is closed at
// once on a stopped cache.
func (c *Cache) Listen(ctx context.Context) <-chan recipe.CacheEvent { return c.store.Listen(ctx) }

// Err returns nil while the cache follows etcd, else why it stopped:
// recipe.ErrCacheFull, recipe.ErrSessionClosed after Close or the
// Session's Close, or an error no retry can cure (a *recipe.OpError
// matching recipe.ErrNoPermission when etcd's access control refuses the
// range).
func (c *Cache) Err() error { return c.store.Err() }

// Close stops the cache (Err becomes recipe.ErrSessionClosed, unless it had
// stopped already), cancels its watch, closes its listeners' channels and
// returns once the cache's goroutine has ended (a listener's goroutine ends
// right after, dropping what it holds). Idempotent; it returns nil.
func (c *Cache) Close() error {
	c.cancel(recipe.ErrSessionClosed)
	<-c.done
	c.store.Stop(recipe.ErrSessionClosed) // the goroutine stopped it already: a no-op
	return nil
}

// stop records why the cache stopped (the first reason only) and closes
// its listeners' channels.
func (c *Cache) stop(err error) { c.store.Stop(err) }

// path returns the Node.Path of key and whether the cache holds key: the
// root, and by its mode the keys one segment below it or every key below.
func (c *Cache) path(key string) (string, bool) {
	p := strings.TrimPrefix(key, c.s.prefix+"/")
	if key == c.root {
		return p, true
	}
	rest, below := strings.CutPrefix(key, c.root+"/")
	switch {
	case !below || c.mode == recipe.CacheNode:
		return "", false
	case c.mode == recipe.CacheChildren:
		return p, !strings.Contains(rest, "/")
	}
	return p, true
}

// full returns an error matching recipe.ErrCacheFull when nodes and bytes
// exceed the cache's limits (the store's), else nil.
func (c *Cache) full(nodes int, bytes int64) error {
	maxNodes, maxBytes := c.store.Limits()
	if nodes > maxNodes || bytes > maxBytes {
		return fmt.Errorf("%w: etcdlock: cache %q: %d nodes, %d bytes (limits %d, %d)", recipe.ErrCacheFull, c.name, nodes, bytes, maxNodes, maxBytes)
	}
	return nil
}
