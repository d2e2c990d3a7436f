package etcdlock

import (
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The count of the keys of a cache's range that it does not hold (its
// root's siblings, keys below its share) follows the watch, so that the
// silent watch's count-only check finds nothing missed; a key it did not
// account for is found.
func TestCacheSilentCheckCounts(t *testing.T) {
	t.Parallel()
	s, in, ctx := groupSession(t, etcdtest.Shared(t))
	p := s.Prefix()
	for _, k := range []string{"r", "r/a", "r/a/x", "r-s", "r-s/a", "r.x"} {
		put(t, in, p+"/"+k, "v")
	}
	c, err := NewCache(s, "r", WithCacheMode(recipe.CacheChildren))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.follower().unchanged(ctx); err != nil {
		t.Fatalf("after the load: %v", err)
	}
	for _, k := range []string{"r/b", "r/b/y", "r/b/y/z", "r-t", "r-s/b"} {
		put(t, in, p+"/"+k, "v")
	}
	put(t, in, p+"/r/a/x", "v2") // an update of a key not held: not a new one
	for _, k := range []string{"r-s/a", "r/a/x"} {
		if _, err := in.Delete(ctx, p+"/"+k); err != nil {
			t.Fatal(err)
		}
	}
	rev := putRev(t, in, p+"/r/c", "v")
	waitRev(t, c, rev)
	if err := c.follower().unchanged(ctx); err != nil {
		t.Fatalf("after the watch's events: %v (held %d, unheld %d)", err, c.store.Len(), c.unheld.Load())
	}
	keys, at := c.accounted()
	if err := c.follower().holds(ctx, keys-1, at); !errors.Is(err, errSilentChange) {
		t.Fatalf("a key not accounted for: %v, want errSilentChange", err)
	}
	if err := c.follower().holds(ctx, keys, at-1); !errors.Is(err, errSilentChange) {
		t.Fatalf("a key written after the cache's revision: %v, want errSilentChange", err)
	}
}

// putRev puts key and returns the revision of the put.
func putRev(t *testing.T, in *clientv3.Client, key, value string) int64 {
	t.Helper()
	resp, err := in.Put(t.Context(), key, value)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// waitRev waits until c holds the range at rev or later.
func waitRev(t *testing.T, c *Cache, rev int64) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		snap, err := c.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if snap.Rev >= rev {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache is at revision %d after 15 s, want %d", snap.Rev, rev)
		}
	}
}

// A range larger than a page is read in pages at one revision; a range
// over the node limit is refused while it is read.
func TestCachePagedLoad(t *testing.T) {
	t.Parallel()
	s, in, ctx := groupSession(t, etcdtest.Shared(t))
	p := s.Prefix()
	const n = cachePage*2 + 10
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for j := i; j < min(i+100, n); j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s/paged/k%05d", p, j), "v"))
		}
		if _, err := in.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	put(t, in, p+"/paged-sibling", "v")
	c, err := NewCache(s, "paged")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Nodes) != n || snap.Nodes[0].Path != "paged/k00000" || snap.Nodes[n-1].Path != fmt.Sprintf("paged/k%05d", n-1) {
		t.Fatalf("Snapshot holds %d nodes, want %d", len(snap.Nodes), n)
	}
	small, err := NewCache(s, "paged", WithCacheLimits(cachePage+1, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if _, err := small.Snapshot(ctx); !errors.Is(err, recipe.ErrCacheFull) {
		t.Fatalf("a range of %d keys with a limit of %d: %v, want ErrCacheFull", n, cachePage+1, err)
	}
}
