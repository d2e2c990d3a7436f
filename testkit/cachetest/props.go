package cachetest

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// modes are the three modes, with their names for messages.
var modes = []struct {
	mode recipe.CacheMode
	name string
}{{recipe.CacheTree, "tree"}, {recipe.CacheChildren, "children"}, {recipe.CacheNode, "node"}}

// seed returns a seed for a writer's random choices, logged so that a
// failure can be replayed.
func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	t.Logf("writer seed %d", s)
	return s
}

// snapshot returns c's Snapshot and its content, failing t on an error, a
// hang or a malformed snapshot.
func snapshot(t *testing.T, c recipe.Cache, who string) (recipe.CacheSnapshot, map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatalf("%s: Snapshot: %v", who, err)
	}
	content, why := contentOf(snap)
	if why != "" {
		t.Fatalf("%s: Snapshot: %s", who, why)
	}
	return snap, content
}

// waitSnapshot polls c's Snapshot until its content is want.
func waitSnapshot(t *testing.T, c recipe.Cache, who string, want map[string]string) recipe.CacheSnapshot {
	t.Helper()
	deadline := time.Now().Add(OpTimeout)
	for {
		snap, got := snapshot(t, c, who)
		if maps.Equal(got, want) {
			return snap
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: Snapshot holds %s after %v, want %s", who, show(got), OpTimeout, show(want))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkGets checks that c's Get of every node of the universe agrees with
// want (Node.Path → data): present with its data, or absent.
func checkGets(t *testing.T, c recipe.Cache, w *writer, who string, want map[string]string) {
	t.Helper()
	for _, rel := range universe(w.root) {
		p := w.h.Path(rel)
		n, ok := c.Get(p)
		d, wanted := want[p]
		switch {
		case ok != wanted:
			t.Errorf("%s: Get(%q) reports a node %v, want %v", who, p, ok, wanted)
		case ok && (n.Path != p || string(n.Data) != d):
			t.Errorf("%s: Get(%q) = %q with data %q, want data %q", who, p, n.Path, n.Data, d)
		case ok && nodeProblem(n) != "":
			t.Errorf("%s: Get(%q): %s", who, p, nodeProblem(n))
		}
	}
}

// initialContent: a cache made after the writes holds them, in each mode.
func (s *suite) initialContent(t *testing.T) {
	const root = "initial"
	w := newWriter(t, s.h, root, seed(t))
	for _, rel := range []string{root, root + "/a", root + "/b", root + "/a/x", root + "/a/x/z", root + "-s", root + "-s/a"} {
		w.put(rel)
	}
	w.mark()
	for _, m := range modes {
		who := "the " + m.name + " cache"
		c := s.h.NewCache(t, root, m.mode, 0)
		r := listen(t, c, "the listener of the "+m.name+" cache")
		want := w.share(w.nodes, m.mode)
		snap, _ := snapshot(t, c, who)
		if got, _ := contentOf(snap); !maps.Equal(got, want) {
			t.Errorf("%s: Snapshot holds %s, want %s", who, show(got), show(want))
		}
		checkGets(t, c, w, who, want)
		r.waitContent(t, want)
		r.stop(t)
		checkEvents(t, r, w, m.mode)
	}
}

// modesHoldTheirShare: caches of the three modes on one root, while nodes
// are written at every depth below it and beside it.
func (s *suite) modesHoldTheirShare(t *testing.T) {
	const root = "modes"
	w := newWriter(t, s.h, root, seed(t))
	w.put(root)
	w.mark()
	cs := make([]recipe.Cache, len(modes))
	rs := make([]*recorder, len(modes))
	for i, m := range modes {
		cs[i] = s.h.NewCache(t, root, m.mode, 0)
		rs[i] = listen(t, cs[i], "the listener of the "+m.name+" cache")
	}
	for _, rel := range universe(root) { // parents first
		w.put(rel)
	}
	for _, rel := range universe(root) {
		w.put(rel)
	}
	w.del(root + "/a/x/z")
	w.del(root + "-s/a")
	for i, m := range modes {
		who := "the " + m.name + " cache"
		want := w.share(w.nodes, m.mode)
		waitSnapshot(t, cs[i], who, want)
		checkGets(t, cs[i], w, who, want)
		rs[i].waitContent(t, want)
		rs[i].stop(t)
		checkEvents(t, rs[i], w, m.mode)
	}
}

// lateListener: a listener of a loaded cache gets its content, then
// CacheInitialized, then the changes.
func (s *suite) lateListener(t *testing.T) {
	const root = "late"
	w := newWriter(t, s.h, root, seed(t))
	w.put(root)
	w.put(root + "/a")
	w.put(root + "/a/x")
	w.mark()
	c := s.h.NewCache(t, root, recipe.CacheTree, 0)
	waitSnapshot(t, c, "the cache", w.share(w.nodes, recipe.CacheTree))
	r := listen(t, c, "the late listener")
	r.waitContent(t, w.share(w.nodes, recipe.CacheTree))
	evs := r.events()
	if n := len(w.nodes) + 1; len(evs) != n || evs[n-1].Kind != recipe.CacheInitialized {
		t.Errorf("the late listener: %d events, want %d (NodeCreated for each node, then CacheInitialized): %v", len(evs), n, evs)
	}
	w.put(root + "/b")
	w.del(root + "/a/x")
	r.waitContent(t, w.share(w.nodes, recipe.CacheTree))
	evs = r.events()
	if n := len(evs); n < 2 || evs[n-2].Kind != recipe.NodeCreated || evs[n-1].Kind != recipe.NodeDeleted {
		t.Errorf("the late listener: its last events are not NodeCreated of %q then NodeDeleted of %q: %v", root+"/b", root+"/a/x", evs)
	}
	r.stop(t)
	checkEvents(t, r, w, recipe.CacheTree)
}

// listenContext: a listener's channel closes when its context ends; the
// cache and its other listeners go on.
func (s *suite) listenContext(t *testing.T) {
	const root = "listenctx"
	w := newWriter(t, s.h, root, seed(t))
	w.put(root)
	w.mark()
	c := s.h.NewCache(t, root, recipe.CacheTree, 0)
	r1 := listen(t, c, "the listener whose context ends")
	r2 := listen(t, c, "the other listener")
	r1.waitContent(t, w.share(w.nodes, recipe.CacheTree))
	r1.stop(t)
	w.put(root + "/a")
	r2.waitContent(t, w.share(w.nodes, recipe.CacheTree))
	if err := c.Err(); err != nil {
		t.Errorf("the cache: Err = %v after a listener's context ended, want nil", err)
	}
	r2.stop(t)
	checkEvents(t, r2, w, recipe.CacheTree)
}

// limit: a cache over its node limit stops with ErrCacheFull.
func (s *suite) limit(t *testing.T) {
	const root, over = "limit", "overlimit"
	w := newWriter(t, s.h, root, seed(t))
	w.put(root)
	w.put(root + "/a")
	c := s.h.NewCache(t, root, recipe.CacheTree, 4)
	r := listen(t, c, "the listener")
	w.put(root + "/b")
	waitSnapshot(t, c, "the cache with 3 nodes of 4", w.share(w.nodes, recipe.CacheTree))
	r.waitContent(t, w.share(w.nodes, recipe.CacheTree))
	if err := c.Err(); err != nil {
		t.Fatalf("the cache with 3 nodes of 4: Err = %v, want nil", err)
	}
	w.put(root + "/c")
	w.put(root + "/a/x")
	waitErr(t, c, "the cache with 5 nodes of 4", recipe.ErrCacheFull)
	r.waitClosed(t, "the cache stopped")
	stopped(t, c, "the cache with 5 nodes of 4", recipe.ErrCacheFull)

	w2 := newWriter(t, s.h, over, 1)
	for _, rel := range []string{over, over + "/a", over + "/b", over + "/c"} {
		w2.put(rel)
	}
	c2 := s.h.NewCache(t, over, recipe.CacheTree, 2)
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	if _, err := c2.Snapshot(ctx); !errors.Is(err, recipe.ErrCacheFull) {
		t.Errorf("a cache of 4 nodes with a limit of 2: Snapshot's error = %v, want ErrCacheFull", err)
	}
	stopped(t, c2, "a cache of 4 nodes with a limit of 2", recipe.ErrCacheFull)
}

// close: Close ends the listeners, Err is ErrSessionClosed.
func (s *suite) close(t *testing.T) {
	const root = "close"
	w := newWriter(t, s.h, root, seed(t))
	w.put(root)
	w.put(root + "/a")
	c := s.h.NewCache(t, root, recipe.CacheTree, 0)
	r1 := listen(t, c, "the listener")
	//lint:ignore SA1012 a nil ctx is part of the contract
	r2 := record(c.Listen(nil), "the listener of a nil context", func() {}) //nolint:staticcheck
	want := w.share(w.nodes, recipe.CacheTree)
	r1.waitContent(t, want)
	r2.waitContent(t, want)
	closeWithin(t, c, "Close")
	r1.waitClosed(t, "Close")
	r2.waitClosed(t, "Close")
	if err := c.Err(); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("Err after Close = %v, want ErrSessionClosed", err)
	}
	stopped(t, c, "the closed cache", recipe.ErrSessionClosed)
	closeWithin(t, c, "a second Close")
}

// closeWithin calls c.Close, failing t on an error or a hang.
func closeWithin(t *testing.T, c recipe.Cache, what string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s: %v, want nil", what, err)
		}
	case <-time.After(OpTimeout):
		t.Fatalf("%s did not return within %v", what, OpTimeout)
	}
}

// waitErr waits until c.Err matches target.
func waitErr(t *testing.T, c recipe.Cache, who string, target error) {
	t.Helper()
	deadline := time.Now().Add(OpTimeout)
	for !errors.Is(c.Err(), target) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: Err = %v after %v, want %v", who, c.Err(), OpTimeout, target)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stopped checks a stopped cache: Err, Snapshot's error match target, and
// Listen's channel closes at once.
func stopped(t *testing.T, c recipe.Cache, who string, target error) {
	t.Helper()
	if err := c.Err(); !errors.Is(err, target) {
		t.Errorf("%s: Err = %v, want %v", who, err, target)
	}
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	if _, err := c.Snapshot(ctx); !errors.Is(err, target) {
		t.Errorf("%s: Snapshot's error = %v, want %v", who, err, target)
	}
	r := listen(t, c, who+": a new listener")
	r.waitClosed(t, "Listen on a stopped cache")
	if evs := r.events(); len(evs) != 0 {
		t.Errorf("%s: a new listener got %v, want no event", who, evs)
	}
}
