package cache_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/cache"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/cachetest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// confTimeout is the session timeout of the suite's caches: short, so
// that LoseSession takes a few seconds.
const confTimeout = 3 * time.Second

// TestConformance runs the backend-neutral cache suite (testkit/cachetest)
// against Cache on the shared server, with persistent watches and with
// one-shot ones: every cache has its own Session through its own
// FaultProxy, whose Cut is Disconnect and whose Blackhole, until the
// Session is lost, is LoseSession.
func TestConformance(t *testing.T) {
	cl := zktest.Shared(t)
	for _, v := range []struct {
		name string
		opts []cache.Option
	}{{"persistent", nil}, {"oneshot", []cache.Option{cache.WithOneShotWatches()}}} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			w := newWriter(t, cl)
			base := "/cachetest-" + v.name
			w.put(base, "")
			cachetest.Run(t, &confHarness{cl: cl, w: w, base: base, opts: v.opts, conns: map[recipe.Cache]confConn{}})
		})
	}
}

// confHarness is the cachetest.Harness of Cache.
type confHarness struct {
	cl   *zktest.Cluster
	w    *writer
	base string
	opts []cache.Option

	mu    sync.Mutex
	conns map[recipe.Cache]confConn
}

type confConn struct {
	s *zookeeper.Session
	p *serverkit.FaultProxy
}

func (h *confHarness) NewCache(tb testing.TB, root string, mode recipe.CacheMode, maxNodes int) recipe.Cache {
	tb.Helper()
	p := serverkit.NewFaultProxy()
	tb.Cleanup(p.Close) // after the session's Close
	s := connect(tb, h.cl, p, confTimeout)
	opts := append([]cache.Option{cache.WithMode(mode)}, h.opts...)
	if maxNodes > 0 {
		opts = append(opts, cache.WithLimits(maxNodes, recipe.DefaultCacheMaxBytes))
	}
	c, err := cache.New(s, h.Path(root), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	h.mu.Lock()
	h.conns[c] = confConn{s: s, p: p}
	h.mu.Unlock()
	return c
}

// Put writes through the writer's session, with the writer's t swapped for
// tb (its failures are tb's).
func (h *confHarness) Put(tb testing.TB, path string, data []byte) {
	tb.Helper()
	p := h.w.chroot + h.Path(path)
	_, err := h.w.c.Set(p, data, -1)
	if errors.Is(err, zk.ErrNoNode) {
		_, err = h.w.c.Create(p, data, 0, zk.WorldACL(zk.PermAll))
	}
	if err != nil {
		tb.Fatalf("put %s: %v", path, err)
	}
}

func (h *confHarness) Delete(tb testing.TB, path string) {
	tb.Helper()
	if err := h.w.c.Delete(h.w.chroot+h.Path(path), -1); err != nil {
		tb.Fatalf("delete %s: %v", path, err)
	}
}

func (h *confHarness) Path(rel string) string { return h.base + "/" + rel }

func (h *confHarness) Faults() cachetest.Faults {
	return cachetest.Faults{Disconnect: h.disconnect, LoseSession: h.loseSession}
}

func (h *confHarness) conn(tb testing.TB, c recipe.Cache) confConn {
	h.mu.Lock()
	defer h.mu.Unlock()
	cc, ok := h.conns[c]
	if !ok {
		tb.Fatalf("a cache the harness did not make: %v", c)
	}
	return cc
}

func (h *confHarness) disconnect(tb testing.TB, c recipe.Cache) func() {
	p := h.conn(tb, c).p
	p.Cut()
	return p.Resume
}

// loseSession blackholes the cache's connection until its Session is
// lost (presumed expired one session timeout after the last reply).
func (h *confHarness) loseSession(tb testing.TB, c recipe.Cache) func() {
	cc := h.conn(tb, c)
	done := cc.s.Done()
	cc.p.Blackhole()
	ctx, cancel := context.WithTimeout(context.Background(), 3*confTimeout)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
		cc.p.Resume()
		tb.Fatalf("the session was not lost %v after a blackhole", 3*confTimeout)
	}
	return cc.p.Resume
}
