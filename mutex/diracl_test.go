package mutex_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestDirACLRefused (issue 23): a lock directory that already exists keeps
// its own ACL, and ZooKeeper checks a create or a delete against the
// parent's ACL only. A client without credentials that made the lock's
// directory first with an open ACL could delete the owner's nodes (a
// holder's too) and plant its own, though the owner's WithACL gives others
// READ only: on the old code the owner's TryAcquire and Acquire took the
// lock in it. Now both are refused with ErrUntrustedDir (and
// recipe.ErrNoPermission), naming the path and no secret, and leave
// nothing; so are directories that grant others CREATE, DELETE or ADMIN in
// other ways.
func TestDirACLRefused(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create("/diracl", nil) // world ACL: the test's cleanup deletes what is below
	owner := append(zk.DigestACL(zk.PermAll, "locker", "secret"), zk.WorldACL(zk.PermRead)...)
	s := rtest.Connect(t, cl, zookeeper.WithAuth("digest", []byte("locker:secret")), zookeeper.WithACL(owner))
	hash := strings.TrimPrefix(zk.DigestACL(0, "locker", "secret")[0].ID, "locker:")
	for name, acl := range map[string][]zk.ACL{
		"open":                  zk.WorldACL(zk.PermAll),
		"owner and world c":     append(zk.DigestACL(zk.PermAll, "locker", "secret"), zk.ACL{Perms: zk.PermCreate | zk.PermRead, Scheme: "world", ID: "anyone"}),
		"owner and world d":     append(zk.DigestACL(zk.PermAll, "locker", "secret"), zk.ACL{Perms: zk.PermDelete | zk.PermRead, Scheme: "world", ID: "anyone"}),
		"owner and world a":     append(zk.DigestACL(zk.PermAll, "locker", "secret"), zk.ACL{Perms: zk.PermAdmin | zk.PermRead, Scheme: "world", ID: "anyone"}),
		"owner and another":     slices.Concat(owner, zk.DigestACL(zk.PermCreate|zk.PermDelete, "intruder", "pw")),
		"same user, other pass": append(zk.DigestACL(zk.PermAll, "locker", "guessed"), zk.WorldACL(zk.PermRead)...),
		"owner without delete":  append(zk.DigestACL(zk.PermAll&^zk.PermDelete, "locker", "secret"), zk.WorldACL(zk.PermRead)...),
		"ip":                    slices.Concat(owner, []zk.ACL{{Perms: zk.PermDelete, Scheme: "ip", ID: "127.0.0.1"}}),
	} {
		lock := "/diracl/" + strings.ReplaceAll(name, " ", "-")
		in.Create(lock, acl)
		m := newMutex(t, s, lock)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := m.TryAcquire(ctx)
		if err == nil {
			t.Errorf("%s: TryAcquire took the lock in a directory another client made", name)
			if nodes := in.Children(lock); len(nodes) == 1 && in.Conn().Delete(cl.Chroot()+lock+"/"+nodes[0], -1) == nil {
				t.Errorf("%s: and a client without credentials deleted the holder's node", name)
			}
			_ = l.Release(context.Background())
		} else if !errors.Is(err, zookeeper.ErrUntrustedDir) || !errors.Is(err, recipe.ErrNoPermission) {
			t.Errorf("%s: TryAcquire: %v, want ErrUntrustedDir and ErrNoPermission", name, err)
		} else if msg := err.Error(); !strings.Contains(msg, lock) || strings.Contains(msg, "secret") || strings.Contains(msg, hash) {
			t.Errorf("%s: the error does not name the path, or shows the password or its hash: %v", name, err)
		}
		l, err = m.Acquire(ctx)
		cancel()
		if err == nil {
			t.Errorf("%s: Acquire took the lock", name)
			_ = l.Release(context.Background())
		} else if !errors.Is(err, zookeeper.ErrUntrustedDir) {
			t.Errorf("%s: Acquire: %v, want ErrUntrustedDir", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
		if got := in.Children(lock); len(got) != 0 {
			t.Errorf("%s: left behind: %q", name, got)
		}
	}
}

// TestDirACLTrusted (issue 23): the directories the rule must not refuse.
// One the owner made itself (found missing, made with WithACL), the same
// one found existing by the owner's next Session, one made by another
// client with exactly the owner's ACL or with less than it (no WRITE), one under a parent that is open (only the directory is checked),
// and, with an "auth" WithACL, the one its first Session made. The default
// open ACL takes any directory, as before.
func TestDirACLTrusted(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create("/dirok", nil)
	auth := zookeeper.WithAuth("digest", []byte("locker:secret"))
	owner := append(zk.DigestACL(zk.PermAll, "locker", "secret"), zk.WorldACL(zk.PermRead)...)
	opts := []zookeeper.Option{auth, zookeeper.WithACL(owner)}
	byAuth := []zookeeper.Option{auth, zookeeper.WithACL(append(zk.AuthACL(zk.PermAll), zk.WorldACL(zk.PermRead)...))}
	in.Create("/dirok/exact", owner)
	in.Create("/dirok/less", append(zk.DigestACL(zk.PermAll&^zk.PermWrite, "locker", "secret"), zk.WorldACL(zk.PermRead)...))
	in.Create("/dirok/open-parent", nil)
	for _, c := range []struct {
		lock string
		opts []zookeeper.Option
	}{
		{"/dirok/made", opts},
		{"/dirok/made", opts}, // a new Session: the directory exists
		{"/dirok/exact", opts},
		{"/dirok/less", opts},
		{"/dirok/open-parent/lock", opts},
		{"/dirok/auth", byAuth},
		{"/dirok/auth", byAuth},
		{"/dirok/open-parent", nil},
	} {
		s := rtest.Connect(t, cl, c.opts...)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := newMutex(t, s, c.lock).TryAcquire(ctx)
		if err != nil {
			t.Errorf("%s: TryAcquire: %v", c.lock, err)
		} else {
			release(t, l)
			if l, err = newMutex(t, s, c.lock).Acquire(ctx); err != nil {
				t.Errorf("%s: Acquire: %v", c.lock, err)
			} else {
				release(t, l)
			}
		}
		cancel()
		s.Close()
	}
}

// TestDirACLHiddenDigest (issue 23): ZooKeeper shows a session without
// ADMIN on a node its digest entries as "user:x", so a session whose
// WithACL grants it no ADMIN cannot tell its own digest from an impostor's
// ("locker" with another password): an existing directory with digest
// entries is refused, its own earlier one included (the error says why);
// the directory it makes itself works.
func TestDirACLHiddenDigest(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create("/hidden", nil)
	noAdmin := append(zk.DigestACL(zk.PermAll&^zk.PermAdmin, "locker", "secret"), zk.WorldACL(zk.PermRead)...)
	opts := []zookeeper.Option{zookeeper.WithAuth("digest", []byte("locker:secret")), zookeeper.WithACL(noAdmin)}
	// The first grant is held until the end: the directory is a container,
	// which ZooKeeper removes once empty (each second here), and the second
	// Session must find it there (on a loaded machine it came after the
	// removal, made the directory itself and was rightly granted).
	for i, want := range []error{nil, zookeeper.ErrUntrustedDir} {
		s := rtest.Connect(t, cl, opts...)
		defer s.Close() // after the release below (deferred later)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := newMutex(t, s, "/hidden/lock").TryAcquire(ctx)
		cancel()
		if err == nil {
			defer release(t, l)
		}
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("Session %d: %v, want %v", i, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), "ADMIN") {
			t.Errorf("Session %d: the error does not say why: %v", i, err)
		}
	}
}
