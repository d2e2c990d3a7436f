package mutex_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestACLWithoutDeleteRefused (issue 23): ZooKeeper deletes a node only
// with DELETE on its parent, and the recipes create their directories with
// WithACL's ACL; an ACL that does not grant the session itself DELETE (nor
// CREATE and READ) left a failed TryAcquire's node in the directory until
// the session ended. Connect refuses such an ACL with ErrUnusableACL (and
// recipe.ErrBadOption), naming no secret; the ACLs that work connect.
func TestACLWithoutDeleteRefused(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	auth := zookeeper.WithAuth("digest", []byte("locker:secret"))
	digest := func(perms int32, pass string) []zk.ACL { return zk.DigestACL(perms, "locker", pass) }
	worldRead := zk.WorldACL(zk.PermRead)
	for name, c := range map[string]struct {
		opts []zookeeper.Option
		ok   bool
	}{
		"digest without delete":  {[]zookeeper.Option{auth, zookeeper.WithACL(append(digest(zk.PermAll&^zk.PermDelete, "secret"), worldRead...))}, false},
		"digest of another pass": {[]zookeeper.Option{auth, zookeeper.WithACL(append(digest(zk.PermAll, "other"), worldRead...))}, false},
		"digest without auth":    {[]zookeeper.Option{zookeeper.WithACL(digest(zk.PermAll, "secret"))}, false},
		"world read only":        {[]zookeeper.Option{auth, zookeeper.WithACL(worldRead)}, false},
		"ip without delete":      {[]zookeeper.Option{zookeeper.WithACL([]zk.ACL{{Perms: zk.PermAll &^ zk.PermDelete, Scheme: "ip", ID: "127.0.0.1"}})}, false},
		"creator, world read":    {[]zookeeper.Option{auth, zookeeper.WithACL(append(digest(zk.PermAll, "secret"), worldRead...))}, true},
		"creator cdr":            {[]zookeeper.Option{auth, zookeeper.WithACL(digest(zk.PermCreate|zk.PermDelete|zk.PermRead, "secret"))}, true},
		"split over entries":     {[]zookeeper.Option{auth, zookeeper.WithACL(append(digest(zk.PermCreate|zk.PermDelete, "secret"), worldRead...))}, true},
		"auth scheme":            {[]zookeeper.Option{auth, zookeeper.WithACL(zk.AuthACL(zk.PermAll))}, true},
		"default":                {nil, true},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		s, err := zookeeper.Connect(ctx, cl.Servers(), c.opts...)
		cancel()
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			s.Close()
			continue
		}
		if err == nil {
			s.Close()
			t.Errorf("%s: Connect accepted an ACL that leaves failed attempts' nodes behind", name)
			continue
		}
		if !errors.Is(err, zookeeper.ErrUnusableACL) || !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("%s: %v, want ErrUnusableACL and ErrBadOption", name, err)
		}
		hash := strings.TrimPrefix(digest(0, "secret")[0].ID, "locker:")
		if msg := err.Error(); strings.Contains(msg, "secret") || strings.Contains(msg, hash) {
			t.Errorf("%s: the error shows the password or its hash: %v", name, err)
		}
	}
}

// TestACLCreatorOnly (issue 23): with a creator-only ACL (the digest
// identity may do everything, everyone else may read) a failed TryAcquire
// of the creator leaves no node; an anonymous session can neither queue
// nor delete the holder's node; the creator can.
func TestACLCreatorOnly(t *testing.T) {
	t.Parallel()
	const lock = "/acl/creator"
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create("/acl", nil) // world ACL: the test's cleanup deletes what is below
	acl := append(zk.DigestACL(zk.PermAll, "locker", "secret"), zk.WorldACL(zk.PermRead)...)
	opts := []zookeeper.Option{zookeeper.WithAuth("digest", []byte("locker:secret")), zookeeper.WithACL(acl)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, err := newMutex(t, rtest.Connect(t, cl, opts...), lock).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holder := in.Children(lock)
	if _, err := newMutex(t, rtest.Connect(t, cl, opts...), lock).TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire while held: %v, want ErrLocked", err)
	}
	if _, err := newMutex(t, rtest.Connect(t, cl), lock).TryAcquire(ctx); !errors.Is(err, recipe.ErrNoPermission) {
		t.Fatalf("anonymous TryAcquire: %v, want ErrNoPermission", err)
	}
	if got := in.Children(lock); len(got) != 1 || got[0] != holder[0] {
		t.Fatalf("after the failed attempts: %q, want only the holder's %q", got, holder)
	}
	if err := in.Conn().Delete(cl.Chroot()+lock+"/"+holder[0], -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("an anonymous delete of the holder's node: %v, want ErrNoAuth", err)
	}
	release(t, held)
	if got := in.Children(lock); len(got) != 0 {
		t.Fatalf("left behind: %q", got)
	}
}
