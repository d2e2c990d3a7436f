// Package cachestore is the store of a recipe.Cache, written once for
// every backend: the nodes held and their limits, the listeners and their
// queues, and the snapshot that waits for a consistent state. A backend's
// follower feeds it states in the server's order (Put, Delete) and says
// when what it holds is one state of the server's (SetConsistent).
package cachestore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Store holds a cache's nodes. Its methods are safe for concurrent use.
type Store struct {
	mu         sync.Mutex
	nodes      map[string]recipe.Node
	kids       map[string]map[string]struct{} // parent path -> paths held below it, one level
	bytes      int64
	maxNodes   int
	maxBytes   int64
	rev        int64 // the newest point of the server's order applied
	loaded     bool  // CacheInitialized was emitted
	consistent bool
	err        error
	changed    chan struct{} // closed when consistent, loaded or err change
	listeners  map[*listener]struct{}
}

// New returns an empty Store with the given limits (0: the defaults,
// recipe.DefaultCacheMaxNodes and DefaultCacheMaxBytes).
func New(maxNodes int, maxBytes int64) *Store {
	if maxNodes <= 0 {
		maxNodes = recipe.DefaultCacheMaxNodes
	}
	if maxBytes <= 0 {
		maxBytes = recipe.DefaultCacheMaxBytes
	}
	return &Store{nodes: make(map[string]recipe.Node), kids: make(map[string]map[string]struct{}), maxNodes: maxNodes, maxBytes: maxBytes,
		changed: make(chan struct{}), listeners: make(map[*listener]struct{})}
}

func size(n recipe.Node) int64 { return int64(len(n.Path) + len(n.Data)) }

// Put sets n, read at rev, and emits NodeCreated or NodeChanged when it
// differs from what is held. A state older than the one held (a smaller
// Created, or the same Created and a smaller Modified) is ignored and Put
// returns false. Over the limits the Store stops with recipe.ErrCacheFull.
func (s *Store) Put(n recipe.Node, rev int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	old, had := s.nodes[n.Path]
	if had && (n.Created < old.Created || n.Created == old.Created && n.Modified < old.Modified) {
		return false
	}
	if had && n.Created == old.Created && n.Modified == old.Modified {
		s.advanceLocked(rev)
		return true
	}
	bytes, count := s.bytes+size(n), len(s.nodes)+1
	if had {
		bytes, count = bytes-size(old), count-1
	}
	if count > s.maxNodes || bytes > s.maxBytes {
		s.stopLocked(fmt.Errorf("%w: %d nodes, %d bytes would be over the limits of %d nodes, %d bytes",
			recipe.ErrCacheFull, count, bytes, s.maxNodes, s.maxBytes))
		return false
	}
	s.nodes[n.Path], s.bytes = n, bytes
	if !had {
		dir := parent(n.Path)
		if s.kids[dir] == nil {
			s.kids[dir] = make(map[string]struct{})
		}
		s.kids[dir][n.Path] = struct{}{}
	}
	s.advanceLocked(rev)
	kind := recipe.NodeCreated
	if had {
		kind = recipe.NodeChanged
	}
	s.emitLocked(recipe.CacheEvent{Kind: kind, Node: n, Rev: s.rev})
	return true
}

// Delete removes path, absent at rev, and emits NodeDeleted if it was
// held.
func (s *Store) Delete(path string, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	old, had := s.nodes[path]
	s.advanceLocked(rev)
	if !had {
		return
	}
	delete(s.nodes, path)
	dir := parent(path)
	delete(s.kids[dir], path)
	if len(s.kids[dir]) == 0 {
		delete(s.kids, dir)
	}
	s.bytes -= size(old)
	s.emitLocked(recipe.CacheEvent{Kind: recipe.NodeDeleted, Node: old, Rev: s.rev})
}

// Has reports whether path is held.
func (s *Store) Has(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.nodes[path]
	return ok
}

// Under returns the paths held strictly below dir, deepest first (so
// that deleting them in order never leaves a node without its parent);
// Children those one level below. Paths are '/'-separated.
func (s *Store) Under(dir string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	var walk func(string)
	walk = func(d string) {
		for _, p := range slices.Sorted(maps.Keys(s.kids[d])) {
			walk(p)
			out = append(out, p)
		}
	}
	walk(dir)
	return out
}

// Children returns the paths held one level below dir, sorted.
func (s *Store) Children(dir string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.kids[dir]))
}

// parent is p's directory: "/a" for "/a/b", "/" for "/a", "a" for "a/b",
// "" for "a".
func parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	switch {
	case i < 0:
		return ""
	case i == 0:
		return "/"
	}
	return p[:i]
}

// advanceLocked moves rev forward to r.
func (s *Store) advanceLocked(r int64) {
	if r > s.rev {
		s.rev = r
	}
}

// SetConsistent says whether what is held is the server's state at one
// point (no read outstanding), at rev. At such a point every listener that
// waits (all of them before the first one; a late one that came while
// reads were outstanding) gets the content as NodeCreated events, then
// CacheInitialized: content told at a Rev is the content at that Rev.
func (s *Store) SetConsistent(ok bool, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked(rev)
	if ok == s.consistent {
		return
	}
	s.consistent = ok
	if ok {
		s.loaded = true
		s.joinLocked()
	}
	s.signalLocked()
}

// Stop stops the Store with err (the first one stays): listeners' channels
// close, Snapshot and Err return it.
func (s *Store) Stop(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(err)
}

func (s *Store) stopLocked(err error) {
	if s.err != nil {
		return
	}
	s.err = err
	for l := range s.listeners {
		l.stop()
	}
	clear(s.listeners)
	s.signalLocked()
}

func (s *Store) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Err returns why the Store stopped, or nil.
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Get returns the node at path, if held.
func (s *Store) Get(path string) (recipe.Node, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[path]
	return n, ok
}

// Snapshot waits until the Store is consistent and returns its content.
// Errors: ctx's cause; the Store's error.
func (s *Store) Snapshot(ctx context.Context) (recipe.CacheSnapshot, error) {
	for {
		s.mu.Lock()
		err, ok, ch := s.err, s.consistent, s.changed
		if err == nil && ok {
			snap := recipe.CacheSnapshot{Rev: s.rev, Nodes: s.sortedLocked()}
			s.mu.Unlock()
			return snap, nil
		}
		s.mu.Unlock()
		if err != nil {
			return recipe.CacheSnapshot{}, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return recipe.CacheSnapshot{}, context.Cause(ctx)
		}
	}
}

func (s *Store) sortedLocked() []recipe.Node {
	out := make([]recipe.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b recipe.Node) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// Rev returns the newest point of the server's order applied (0 before
// any), consistent or not; it does not wait.
func (s *Store) Rev() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Len returns how many nodes are held.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.nodes)
}

// Paths returns the paths held, sorted; unlike Under, it needs no path's
// parent to be held (an etcd key range).
func (s *Store) Paths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.nodes))
}

// Limits returns the Store's limits (New's, the defaults filled in), for a
// follower that checks a read against them before it hands the read over.
func (s *Store) Limits() (nodes int, bytes int64) {
	return s.maxNodes, s.maxBytes
}

// Size is what a node counts against the byte limit: its path and data.
func Size(n recipe.Node) int64 { return size(n) }
