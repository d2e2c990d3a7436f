package etcdlock

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/testkit/locknametest"
)

// TestCheckName: the shared rules (internal/lockname) with MaxNameLen, and
// the one rule of this package's own (no element starting with "_lock_" or
// "_member_").
func TestCheckName(t *testing.T) {
	const reserved = `" starts with "_lock_", which this package reserves for its keys`
	cases := append(locknametest.Shared(MaxNameLen, "etcdlock.MaxNameLen"), []locknametest.Case{
		{Name: "/a"},
		{Name: "jobs/nightly-report"},
		{Name: "a/_lockx"},
		{Name: "a/lock_"},
		{Name: "a_lock_"},
		{Name: "a.b/c d"},
		{Name: "//a"},
		{Name: "_lock_", Why: `element "_lock_` + reserved},
		{Name: "/_lock_x", Why: `element "_lock_x` + reserved},
		{Name: "a/_lock_b/c", Why: `element "_lock_b` + reserved},
		{Name: "a/_lock_" + strings.Repeat("y", 300), Why: `element "_lock_yy`, Prefix: true},
		{Name: "a/_memberx"},
		{Name: "a/member_"},
		{Name: "a_member_"},
		{Name: "_member_", Why: `element "_member_" starts with "_member_", which this package reserves for its keys`},
		{Name: "a/_member_b/c", Why: `element "_member_b" starts with "_member_", which this package reserves for its keys`},
	}...)
	locknametest.Run(t, "etcdlock: invalid lock name ", CheckName, cases, ErrInvalidName)
}

// No lock's key range holds another lock's keys: for every pair of distinct
// names, no key of one starts with the other's range prefix.
func TestLockRangesAreDisjoint(t *testing.T) {
	names := []string{"a", "a/b", "a/b/c", "ab", "a/_", "a/_l", "a/_lock", "a/_lockx", "a/lock_", "b", "a_lock_", "a/b_lock_", "_", "_l",
		"/", "//", "//a", "a/", "a//", "a//b", "a/b/", "_/", "a\nb"}
	for _, n := range names {
		if err := CheckName(n); err != nil {
			t.Fatalf("a name of the test is refused: %v", err)
		}
	}
	for _, a := range names {
		for _, b := range names {
			if a != b && strings.HasPrefix(lockDir("/p", b)+strings.Repeat("f", 32), lockDir("/p", a)) {
				t.Errorf("a key of lock %q is in the range of lock %q", b, a)
			}
		}
	}
	if lockDir("/p", "/a/b") != lockDir("/p", "a/b") {
		t.Errorf("a leading slash makes another lock")
	}
}

// No lock's or group's key range holds a key of another lock or group:
// for every pair of names, no key of a lock or group of one (a lock's
// contender and lock-delay keys, a group's member keys with ids of every
// shape) is in the range of the other's lock or group, unless it is the
// same lock or group.
func TestGroupRangesAreDisjoint(t *testing.T) {
	names := []string{"a", "a/b", "ab", "a/_", "a/_m", "a/_member", "a/_memberx", "a/member_", "a_member_", "a/_lock", "_", "/", "//", "a/", "a//b", "x_member_"}
	ids := []string{"x", "_member_", "_lock_", "a b", strings.Repeat("i", 128), ".x"}
	type keyOf struct{ kind, name, key string }
	var keys []keyOf
	for _, n := range names {
		if err := CheckName(n); err != nil {
			t.Fatalf("a name of the test is refused: %v", err)
		}
		keys = append(keys, keyOf{"lock", n, lockDir("/p", n) + strings.Repeat("f", 32)},
			keyOf{"lock", n, "/p/" + strings.TrimPrefix(n, "/") + "/_lockdelay_held"})
		for _, id := range ids {
			keys = append(keys, keyOf{"group", n, groupDir("/p", n) + id})
		}
	}
	for _, n := range names {
		for _, k := range keys {
			if (k.kind != "group" || k.name != n) && strings.HasPrefix(k.key, groupDir("/p", n)) {
				t.Errorf("key %q of %s %q is in the range of group %q", k.key, k.kind, k.name, n)
			}
			if (k.kind != "lock" || k.name != n) && strings.HasPrefix(k.key, lockDir("/p", n)) {
				t.Errorf("key %q of %s %q is in the range of lock %q", k.key, k.kind, k.name, n)
			}
		}
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
