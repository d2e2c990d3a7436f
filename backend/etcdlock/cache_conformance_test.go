package etcdlock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/cachetest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// TestCacheConformance runs the backend-neutral cache suite
// (testkit/cachetest) against Cache on the real server, with both fault
// hooks: Disconnect closes the cache's connections (proxy cut),
// LoseSession blackholes them until the Session's etcd lease is presumed
// lost.
func TestCacheConformance(t *testing.T) {
	t.Parallel()
	cachetest.Run(t, &cacheHarness{e: newEnv(t), conns: map[recipe.Cache]cacheConn{}})
}

// cacheBase is the directory, below the test's prefix, of the suite's
// roots.
const cacheBase = "cachetest/"

// cacheHarness is the cachetest.Harness of Cache: every cache has its own
// Session (testTTL) through its own FaultProxy; the writer is the
// inspector client.
type cacheHarness struct {
	e *env

	mu    sync.Mutex
	conns map[recipe.Cache]cacheConn
}

// cacheConn is what a cache of the harness runs on.
type cacheConn struct {
	s *etcdlock.Session
	p *serverkit.FaultProxy
}

func (h *cacheHarness) NewCache(tb testing.TB, root string, mode recipe.CacheMode, maxNodes int) recipe.Cache {
	tb.Helper()
	s, p := h.e.connect(tb)
	c, err := etcdlock.NewCache(s, cacheBase+root, etcdlock.WithCacheMode(mode), etcdlock.WithCacheLimits(maxNodes, 0))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() }) // before the Session's Close
	h.mu.Lock()
	h.conns[c] = cacheConn{s: s, p: p}
	h.mu.Unlock()
	return c
}

func (h *cacheHarness) Put(tb testing.TB, path string, data []byte) {
	tb.Helper()
	if _, err := h.e.in.Put(opCtx(tb), h.e.prefix+"/"+cacheBase+path, string(data)); err != nil {
		tb.Fatalf("put %s: %v", path, err)
	}
}

func (h *cacheHarness) Delete(tb testing.TB, path string) {
	tb.Helper()
	if _, err := h.e.in.Delete(opCtx(tb), h.e.prefix+"/"+cacheBase+path); err != nil {
		tb.Fatalf("delete %s: %v", path, err)
	}
}

func (h *cacheHarness) Path(rel string) string { return cacheBase + rel }

func (h *cacheHarness) Faults() cachetest.Faults {
	return cachetest.Faults{Disconnect: h.disconnect, LoseSession: h.loseSession}
}

func (h *cacheHarness) conn(tb testing.TB, c recipe.Cache) cacheConn {
	h.mu.Lock()
	defer h.mu.Unlock()
	cc, ok := h.conns[c]
	if !ok {
		tb.Fatalf("a cache the harness did not make: %v", c)
	}
	return cc
}

// disconnect closes the cache's connections and refuses new ones until
// heal; the client dials again then.
func (h *cacheHarness) disconnect(tb testing.TB, c recipe.Cache) func() {
	p := h.conn(tb, c).p
	p.Cut()
	return p.Resume
}

// loseSession blackholes the cache's connections until its Session
// presumes its etcd lease lost (2/3 TTL after the last acknowledged
// keep-alive); heal ends the blackhole, which closes them.
func (h *cacheHarness) loseSession(tb testing.TB, c recipe.Cache) func() {
	cc := h.conn(tb, c)
	done := cc.s.Done()
	cc.p.Blackhole()
	select {
	case <-done:
	case <-time.After(3 * testTTL):
		cc.p.Resume()
		tb.Fatalf("the Session's etcd lease was not presumed lost %v after a blackhole", 3*testTTL)
	}
	return cc.p.Resume
}
