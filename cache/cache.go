package cache

import (
	"context"
	"fmt"
	"sync"

	"github.com/zkrecipes/zkrecipes/internal/cachestore"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Cache is a recipe.Cache of a znode, its children or its subtree. Node
// paths are below the Session's chroot, as the root was given.
type Cache struct {
	store *cachestore.Store
	stop  context.CancelFunc
	done  chan struct{}
	once  sync.Once
}

var _ recipe.Cache = (*Cache)(nil)

// Option configures New.
type Option func(*config) error

type config struct {
	mode     recipe.CacheMode
	maxNodes int
	maxBytes int64
	oneShot  bool
}

// WithMode sets what the cache holds (default recipe.CacheTree). Errors:
// recipe.ErrBadOption for an unknown mode.
func WithMode(m recipe.CacheMode) Option {
	return func(c *config) error {
		if m < recipe.CacheTree || m > recipe.CacheNode {
			return fmt.Errorf("%w: cache mode %d", recipe.ErrBadOption, m)
		}
		c.mode = m
		return nil
	}
}

// WithLimits sets the most nodes and bytes (paths and data) the cache
// holds (0 keeps the default: recipe.DefaultCacheMaxNodes,
// DefaultCacheMaxBytes); over them it stops with recipe.ErrCacheFull.
// Errors: recipe.ErrBadOption for a negative limit.
func WithLimits(nodes int, bytes int64) Option {
	return func(c *config) error {
		if nodes < 0 || bytes < 0 {
			return fmt.Errorf("%w: cache limits %d nodes, %d bytes: each must be 0 (the default) or more", recipe.ErrBadOption, nodes, bytes)
		}
		c.maxNodes, c.maxBytes = nodes, bytes
		return nil
	}
}

// WithOneShotWatches makes the cache follow with one-shot watches (a data
// and a child watch per node, set again by each read), as it does by
// itself on a server without persistent watches (before ZooKeeper 3.6):
// more requests, same guarantees.
func WithOneShotWatches() Option {
	return func(c *config) error { c.oneShot = true; return nil }
}

// New starts a cache of root (an absolute path below the Session's chroot;
// it need not exist) and returns it at once; it loads in the background
// (Listen's CacheInitialized, or Snapshot, wait for that). It follows the
// server through reconnections and session losses until Close or the
// Session's Close. Errors: a *zookeeper.PathError matching
// recipe.ErrInvalidPath for a bad root (and recipe.ErrTooLarge for one
// too long for the packet limit); recipe.ErrBadOption (also for a nil s);
// recipe.ErrSessionClosed.
func New(s *zookeeper.Session, root string, opts ...Option) (*Cache, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil Session", recipe.ErrBadOption)
	}
	side := zkside.SessionOf(s)
	if err := side.ValidatePath(root); err != nil {
		return nil, err
	}
	var cfg config
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	st, err := s.NewStream()
	if err != nil {
		return nil, err
	}
	if err := st.Check(root); err != nil {
		st.Close()
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	c := &Cache{store: cachestore.New(cfg.maxNodes, cfg.maxBytes), stop: stop, done: make(chan struct{})}
	f := &follower{st: st, store: c.store, root: root, mode: cfg.mode, oneShot: cfg.oneShot,
		log: side.Logger().With("cache", root), reqs: make(map[uint64]request)}
	go func() {
		defer close(c.done)
		defer f.st.Close()
		f.run(ctx)
	}()
	return c, nil
}

// Get returns the node at path as the cache holds it now.
func (c *Cache) Get(path string) (recipe.Node, bool) { return c.store.Get(path) }

// Snapshot waits until the cache holds a state the server held as a whole,
// and returns it (recipe.Cache).
func (c *Cache) Snapshot(ctx context.Context) (recipe.CacheSnapshot, error) {
	return c.store.Snapshot(ctx)
}

// Listen delivers the content, CacheInitialized, then every change
// (recipe.Cache).
func (c *Cache) Listen(ctx context.Context) <-chan recipe.CacheEvent { return c.store.Listen(ctx) }

// Err returns nil while the cache follows the server, else why it stopped
// (recipe.Cache).
func (c *Cache) Err() error { return c.store.Err() }

// Close stops the cache, removes its persistent watch from the server
// (unless another cache of the Session holds the same one) and waits for
// its goroutine. Idempotent; it returns nil.
func (c *Cache) Close() error {
	c.once.Do(func() {
		c.stop()
		<-c.done
		c.store.Stop(recipe.ErrSessionClosed)
	})
	return nil
}
