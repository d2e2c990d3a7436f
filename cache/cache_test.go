package cache_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/cache"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// connect opens a Session through p (nil: directly), closed at cleanup.
func connect(t testing.TB, cl *zktest.Cluster, p *serverkit.FaultProxy, timeout time.Duration) *zookeeper.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := []zookeeper.Option{zookeeper.WithSessionTimeout(timeout)}
	if p != nil {
		opts = append(opts, zookeeper.WithDialer(p.Dial))
	}
	s, err := zookeeper.Connect(ctx, cl.Servers(), opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// writer writes nodes below the chroot through its own session.
type writer struct {
	t      testing.TB
	c      *zk.Conn
	chroot string
}

func newWriter(t testing.TB, cl *zktest.Cluster) *writer {
	s := connect(t, cl, nil, 10*time.Second)
	return &writer{t: t, c: s.Conn(), chroot: cl.Chroot()}
}

func (w *writer) put(p, data string) {
	w.t.Helper()
	_, err := w.c.Set(w.chroot+p, []byte(data), -1)
	if errors.Is(err, zk.ErrNoNode) {
		_, err = w.c.Create(w.chroot+p, []byte(data), 0, zk.WorldACL(zk.PermAll))
	}
	if err != nil {
		w.t.Fatalf("put %s: %v", p, err)
	}
}

func (w *writer) del(p string) {
	w.t.Helper()
	if err := w.c.Delete(w.chroot+p, -1); err != nil {
		w.t.Fatalf("delete %s: %v", p, err)
	}
}

// tree reads what the server holds at root, as path=data lines.
func (w *writer) tree(root string, mode recipe.CacheMode) []string {
	w.t.Helper()
	var out []string
	var walk func(p string, depth int)
	walk = func(p string, depth int) {
		data, _, err := w.c.Get(w.chroot + p)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		if err != nil {
			w.t.Fatal(err)
		}
		out = append(out, p+"="+string(data))
		if mode == recipe.CacheNode || mode == recipe.CacheChildren && depth == 1 {
			return
		}
		kids, _, err := w.c.Children(w.chroot + p)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			w.t.Fatal(err)
		}
		for _, k := range kids {
			walk(strings.TrimSuffix(p, "/")+"/"+k, depth+1)
		}
	}
	walk(root, 0)
	slices.Sort(out)
	return out
}

func lines(s recipe.CacheSnapshot) []string {
	var out []string
	for _, n := range s.Nodes {
		out = append(out, n.Path+"="+string(n.Data))
	}
	slices.Sort(out) // as tree sorts them
	return out
}

// converge waits until c's snapshot equals the server's tree.
func converge(t *testing.T, c *cache.Cache, w *writer, root string, mode recipe.CacheMode) recipe.CacheSnapshot {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		snap, err := c.Snapshot(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		want := w.tree(root, mode)
		if slices.Equal(lines(snap), want) {
			return snap
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache holds %v, the server %v", lines(snap), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// follow applies a listener's events to a map, checking that per node
// Modified (for one Created) and Rev never go back.
type follow struct {
	t      *testing.T
	nodes  map[string]recipe.Node
	rev    int64
	inited bool
	ch     <-chan recipe.CacheEvent
}

func listen(t *testing.T, c *cache.Cache) *follow {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &follow{t: t, nodes: make(map[string]recipe.Node), ch: c.Listen(ctx)}
}

func (f *follow) apply(e recipe.CacheEvent) {
	f.t.Helper()
	if e.Rev < f.rev {
		f.t.Errorf("event %v %s at rev %d after rev %d", e.Kind, e.Node.Path, e.Rev, f.rev)
	}
	f.rev = e.Rev
	old, had := f.nodes[e.Node.Path]
	switch e.Kind {
	case recipe.NodeCreated, recipe.NodeChanged:
		if had && (e.Node.Created < old.Created || e.Node.Created == old.Created && e.Node.Modified <= old.Modified) {
			f.t.Errorf("%s went from %d/%d to %d/%d", e.Node.Path, old.Created, old.Modified, e.Node.Created, e.Node.Modified)
		}
		if had != (e.Kind == recipe.NodeChanged) {
			f.t.Errorf("%v of %s, held before: %v", e.Kind, e.Node.Path, had)
		}
		f.nodes[e.Node.Path] = e.Node
	case recipe.NodeDeleted:
		if !had {
			f.t.Errorf("deleted %s, not held", e.Node.Path)
		}
		delete(f.nodes, e.Node.Path)
	case recipe.CacheInitialized:
		f.inited = true
	}
}

// until applies events until the map equals want.
func (f *follow) until(want []string) {
	f.t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		var got []string
		for _, n := range f.nodes {
			got = append(got, n.Path+"="+string(n.Data))
		}
		slices.Sort(got)
		if f.inited && slices.Equal(got, want) {
			return
		}
		select {
		case e, ok := <-f.ch:
			if !ok {
				f.t.Fatalf("the listener closed; it holds %v, want %v", got, want)
			}
			f.apply(e)
		case <-timeout:
			f.t.Fatalf("the listener holds %v, want %v", got, want)
		}
	}
}

func newCache(t *testing.T, s *zookeeper.Session, root string, opts ...cache.Option) *cache.Cache {
	t.Helper()
	c, err := cache.New(s, root, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestFollow: each mode, with persistent and one-shot watches, loads what
// was there, follows creates, writes and deletes, and survives a cut
// connection (changes made while cut are reported as differences), never
// reporting a state going back. (Session losses: TestConformance's
// LoseSession.)
func TestFollow(t *testing.T) {
	cl := zktest.Shared(t)
	for _, mode := range []recipe.CacheMode{recipe.CacheTree, recipe.CacheChildren, recipe.CacheNode} {
		for _, oneShot := range []bool{false, true} {
			name := fmt.Sprintf("mode%d/oneShot=%t", mode, oneShot)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				root := fmt.Sprintf("/follow%d%t", mode, oneShot)
				w := newWriter(t, cl)
				w.put(root, "r0")
				w.put(root+"/a", "a0")
				w.put(root+"/a/b", "b0")
				p := serverkit.NewFaultProxy()
				t.Cleanup(p.Close)
				s := connect(t, cl, p, 3*time.Second)
				opts := []cache.Option{cache.WithMode(mode)}
				if oneShot {
					opts = append(opts, cache.WithOneShotWatches())
				}
				c := newCache(t, s, root, opts...)
				f := listen(t, c)
				f.until(w.tree(root, mode))
				converge(t, c, w, root, mode)

				w.put(root, "r1")
				w.put(root+"/c", "c0")
				w.put(root+"/a/b/d", "d0")
				w.put(root+"/a", "a1")
				w.del(root + "/a/b/d")
				w.put(root+"/a/b", "b1")
				f.until(w.tree(root, mode))
				converge(t, c, w, root, mode)

				p.Cut()
				w.put(root+"/e", "e0")
				w.del(root + "/c")
				w.put(root+"/a/b", "b2")
				time.Sleep(200 * time.Millisecond)
				p.Resume()
				f.until(w.tree(root, mode))
				converge(t, c, w, root, mode)

				if err := c.Err(); err != nil {
					t.Errorf("Err: %v", err)
				}
			})
		}
	}
}

// TestLimitsAndClose: a cache over its node limit stops with ErrCacheFull
// and closes its listeners; Close ends listeners, Err is ErrSessionClosed,
// and the server holds no watch of the cache's any more.
func TestLimitsAndClose(t *testing.T) {
	cl := zktest.Start(t)
	w := newWriter(t, cl)
	for _, p := range []string{"/lim", "/lim/a", "/lim/b", "/lim/c"} {
		w.put(p, "x")
	}
	s := connect(t, cl, nil, 10*time.Second)
	addr := strings.SplitN(cl.Servers()[0], "/", 2)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before, err := zktest.WatchCount(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	full := newCache(t, s, "/lim", cache.WithLimits(3, 1<<20))
	ch := full.Listen(ctx)
	for range ch {
	}
	if err := full.Err(); !errors.Is(err, recipe.ErrCacheFull) {
		t.Errorf("Err over the limit: %v, want ErrCacheFull", err)
	}
	c := newCache(t, s, "/lim")
	if _, err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	ch = c.Listen(ctx)
	full.Close()
	c.Close()
	for range ch {
	}
	if err := c.Err(); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("Err after Close: %v, want ErrSessionClosed", err)
	}
	for {
		n, err := zktest.WatchCount(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		if n == before {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d watches on the server after Close, %d before the caches", n, before)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := cache.New(s, "bad"); !errors.Is(err, recipe.ErrInvalidPath) {
		t.Errorf("New(\"bad\"): %v, want ErrInvalidPath", err)
	}
	if _, err := cache.New(s, "/x", cache.WithLimits(-1, 1)); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("WithLimits(-1, 1): %v, want ErrBadOption", err)
	}
	if _, err := cache.New(nil, "/x"); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("New(nil, ...): %v, want ErrBadOption", err)
	}
	if _, err := cache.New(s, "/"+strings.Repeat("x", 2<<20)); !errors.Is(err, recipe.ErrTooLarge) {
		t.Errorf("New of a 2 MiB path: %v, want ErrTooLarge (its requests would make the server close the connection, again and again)", err)
	}
	closed := connect(t, cl, nil, 10*time.Second)
	closed.Close()
	if _, err := cache.New(closed, "/x"); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("New on a closed Session: %v, want ErrSessionClosed", err)
	}
}
