package recipe

import (
	"context"
	"errors"
)

// Caches (Curator's CuratorCache, client-go's informer store): a local
// copy of one node, its children, or a subtree, loaded once and then kept
// up to date from the server's change notifications. Implemented by
// package cache (ZooKeeper) and etcdlock.NewCache.

// ErrCacheFull is the error of a cache that met its node or byte limit:
// it stops following (its listeners' channels close) rather than grow
// without bound.
var ErrCacheFull = errors.New("recipe: cache over its node or byte limit")

// The default limits of a cache (each backend's options change them).
const (
	DefaultCacheMaxNodes = 100_000  // nodes held
	DefaultCacheMaxBytes = 64 << 20 // bytes of paths and data held
)

// CacheMode says what a cache holds under its root.
type CacheMode int

// The modes of a cache.
const (
	// CacheTree holds the root and every node below it.
	CacheTree CacheMode = iota
	// CacheChildren holds the root and its direct children.
	CacheChildren
	// CacheNode holds the root alone.
	CacheNode
)

// Node is one node (ZooKeeper) or key (etcd) as a cache holds it.
type Node struct {
	// Path is the node's path: absolute on ZooKeeper, the key below the
	// Session's prefix on etcd.
	Path string
	// Data is the node's data. Callers must not modify it.
	Data []byte
	// Created is the revision that created this incarnation of the node
	// (ZooKeeper czxid, etcd create revision).
	Created int64
	// Modified is the revision of the node's last write (ZooKeeper mzxid,
	// etcd mod revision): for one Created it never goes back.
	Modified int64
}

// EventKind is the kind of a CacheEvent.
type EventKind int

// The kinds of cache event.
const (
	// NodeCreated: a node the cache did not hold appeared.
	NodeCreated EventKind = iota + 1
	// NodeChanged: a node's data was written (Modified grew, or Created
	// changed: the node was deleted and made again between two reads).
	NodeChanged
	// NodeDeleted: a node the cache held is gone; Node is its last state.
	NodeDeleted
	// CacheInitialized: the events before it are the whole cache as the
	// server held it at Rev; the ones after it are changes.
	CacheInitialized
)

// String returns the kind's name ("created", "changed", "deleted",
// "initialized").
func (k EventKind) String() string {
	switch k {
	case NodeCreated:
		return "created"
	case NodeChanged:
		return "changed"
	case NodeDeleted:
		return "deleted"
	case CacheInitialized:
		return "initialized"
	}
	return "unknown"
}

// CacheEvent is one change of a cache.
type CacheEvent struct {
	Kind EventKind
	// Node is the new state (NodeCreated, NodeChanged) or the last state
	// held (NodeDeleted); zero for CacheInitialized.
	Node Node
	// Rev is a point of the server's order at which the node's state held
	// (at which it was absent, for NodeDeleted): it never goes back
	// between the events of one listener.
	Rev int64
}

// CacheSnapshot is the cache's content as the server held it at one point
// of its order.
type CacheSnapshot struct {
	// Rev is that point (a ZooKeeper zxid or etcd revision).
	Rev int64
	// Nodes, sorted by Path.
	Nodes []Node
}

// Cache is a local copy of a node, its children or a subtree. Per node,
// the states it reports are states the server had, in the server's order,
// possibly skipping some (two quick writes can be seen as one). Its
// methods are safe for concurrent use.
type Cache interface {
	// Get returns the node at path as the cache holds it now, and whether
	// it holds one; it does not wait for the server.
	Get(path string) (Node, bool)
	// Snapshot waits until the cache holds a state the server held as a
	// whole (no read outstanding), and returns it; while the server is
	// out of reach, that is the last state held (stale, never invented).
	// Errors: ctx's cause; the error that stopped the cache (Err).
	Snapshot(ctx context.Context) (CacheSnapshot, error)
	// Listen delivers the cache's content as NodeCreated events, then
	// CacheInitialized once the cache is loaded, then every change in the
	// server's order. Each listener has its own unbounded queue: a slow
	// reader never blocks the cache, but holds the events it has not read.
	// The channel closes when ctx ends (a nil ctx never ends), the cache
	// is closed, or it stops (Err); at a close or a stop, what is queued
	// is dropped.
	Listen(ctx context.Context) <-chan CacheEvent
	// Err returns nil while the cache follows the server, else why it
	// stopped: ErrCacheFull, ErrSessionClosed after Close or the
	// Session's end, ErrNoPermission, or another error it cannot retry.
	Err() error
	// Close stops the cache and releases what it holds on the server (its
	// watches). Idempotent.
	Close() error
}
