package etcdlock

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
)

func TestCheckName(t *testing.T) {
	for _, n := range []string{"a", "/a", "jobs/nightly-report", "/jobs/nightly", "a/_lockx", "a/lock_", "é/ü", "a.b/c d"} {
		if why := checkName(n); why != "" {
			t.Errorf("checkName(%q) = %q, want a valid name", n, why)
		}
	}
	for _, n := range []string{"", "/", "//a", "a//b", "a/", "_lock_", "_lock_x", "a/_lock_b/c", "a\x00b", "a\nb", "a\xffb",
		strings.Repeat("x", MaxNameLen+1)} {
		if checkName(n) == "" {
			t.Errorf("checkName(%q) accepted an invalid name", n)
		}
	}
	if checkName(strings.Repeat("x", MaxNameLen)) != "" {
		t.Errorf("a name of MaxNameLen bytes refused")
	}
}

// No lock's key range holds another lock's keys: for every pair of distinct
// names, no key of one starts with the other's range prefix.
func TestLockRangesAreDisjoint(t *testing.T) {
	names := []string{"a", "a/b", "a/b/c", "ab", "a/_", "a/_l", "a/_lock", "a/_lockx", "a/lock_", "b", "a_lock_", "a/b_lock_", "_", "_l"}
	key := lockDir("/p", "x")[len("/p/x"):] + strings.Repeat("f", 32) // the part after the name
	for _, a := range names {
		for _, b := range names {
			if a != b && strings.HasPrefix("/p/"+b+key, lockDir("/p", a)) {
				t.Errorf("a key of lock %q is in the range of lock %q", b, a)
			}
		}
	}
	if lockDir("/p", "/a/b") != lockDir("/p", "a/b") {
		t.Errorf("a leading slash makes another lock")
	}
}

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url       string
		endpoints string
		prefix    string
	}{
		{"etcd://127.0.0.1:2379", "127.0.0.1:2379", ""},
		{"etcd://h1:2379,h2:2380/app", "h1:2379,h2:2380", "/app"},
		{"etcd://[::1]:2379/a/b/", "[::1]:2379", "/a/b"},
		{"etcd://h:1/", "h:1", ""},
	} {
		eps, prefix, err := parseURL(c.url)
		if err != nil || strings.Join(eps, ",") != c.endpoints || prefix != c.prefix {
			t.Errorf("parseURL(%q) = %v, %q, %v; want %s, %q", c.url, eps, prefix, err, c.endpoints, c.prefix)
		}
	}
}

// deleteOwned deletes only the incarnation of a key it was given: a key
// deleted and put again (a newer create revision) survives a stale delete
// (etcd issue 22082, at the level of the request).
func TestDeleteOwnedComparesCreateRevision(t *testing.T) {
	srv := etcdtest.Shared(t)
	prefix := etcdtest.Prefix(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Connect(ctx, srv.URL(prefix), WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err := s.current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := lockDir(prefix, "guard") + newGUID()
	put := func() int64 {
		resp, err := s.cli.Put(ctx, key, "", clientv3.WithLease(g.id))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	old := put()
	if _, err := s.cli.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	newer := put()
	if err := s.deleteOwned(ctx, g, key, old); err != nil {
		t.Fatal(err)
	}
	resp, err := s.cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != newer {
		t.Fatalf("after a delete of the older incarnation: %v, %v; want the key created at %d", resp, err, newer)
	}
	if err := s.deleteOwned(ctx, g, key, newer); err != nil {
		t.Fatal(err)
	}
	if resp, err := s.cli.Get(ctx, key); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("after a delete of its own incarnation: %v, %v", resp, err)
	}
}
