package zookeeper

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestDirRule: the directory rule alone (checkDirACL, dirRuleApplies).
func TestDirRule(t *testing.T) {
	locker := []authInfo{{"digest", []byte("locker:secret")}}
	digest := func(perms int32, user, pass string) zk.ACL { return zk.DigestACL(perms, user, pass)[0] }
	world := func(perms int32) zk.ACL { return zk.WorldACL(perms)[0] }
	owner := []zk.ACL{digest(zk.PermAll, "locker", "secret"), world(zk.PermRead)}
	byAuth := []zk.ACL{{Scheme: "auth", Perms: zk.PermAll}, world(zk.PermRead)}
	x509 := zk.ACL{Scheme: "x509", ID: "CN=locker", Perms: zk.PermAll}
	for _, c := range []struct {
		name     string
		dir, acl []zk.ACL
		ok       bool
	}{
		{"exact", owner, owner, true},
		{"less", []zk.ACL{digest(zk.PermCreate|zk.PermDelete|zk.PermRead, "locker", "secret")}, owner, true},
		{"open", zk.WorldACL(zk.PermAll), owner, false},
		{"world create", []zk.ACL{owner[0], world(zk.PermCreate)}, owner, false},
		{"world write is not guarded", []zk.ACL{owner[0], world(zk.PermRead | zk.PermWrite)}, owner, true},
		{"another password", []zk.ACL{digest(zk.PermAll, "locker", "other"), world(zk.PermRead)}, owner, false},
		{"hidden hash", []zk.ACL{{Scheme: "digest", ID: "locker:x", Perms: zk.PermAll}}, owner, false},
		{"no delete for us", []zk.ACL{digest(zk.PermAll&^zk.PermDelete, "locker", "secret")}, owner, false},
		{"auth made it", []zk.ACL{digest(zk.PermAll, "locker", "secret"), world(zk.PermRead)}, byAuth, true},
		{"auth: another digest", []zk.ACL{digest(zk.PermAll, "intruder", "pw")}, byAuth, false},
		{"auth: x509 identity taken as held", []zk.ACL{x509, owner[0]}, byAuth, true},
		{"auth: never ip", []zk.ACL{owner[0], {Scheme: "ip", ID: "10.0.0.1", Perms: zk.PermDelete}}, byAuth, false},
		{"same x509 entry", []zk.ACL{x509}, []zk.ACL{x509}, true},
		{"world cdr allowed by world cdr", zk.WorldACL(zk.PermCreate | zk.PermDelete | zk.PermRead), zk.WorldACL(zk.PermAll &^ zk.PermAdmin), true},
	} {
		if why := checkDirACL(c.dir, c.acl, locker); (why == "") != c.ok {
			t.Errorf("%s: %q, want ok %v", c.name, why, c.ok)
		}
	}
	for _, c := range []struct {
		acl  []zk.ACL
		want bool
	}{
		{zk.WorldACL(zk.PermAll), false},
		{[]zk.ACL{world(zk.PermCreate | zk.PermRead), world(zk.PermDelete | zk.PermAdmin)}, false},
		{zk.WorldACL(zk.PermAll &^ zk.PermAdmin), true},
		{owner, true},
	} {
		if got := dirRuleApplies(c.acl); got != c.want {
			t.Errorf("dirRuleApplies(%s) = %v, want %v", describeACL(c.acl), got, c.want)
		}
	}
}

// TestDirACLCheckedOnce: the default open ACL never reads a directory's
// ACL (no round trip, no cache); a restrictive one reads it before the
// first create in a directory and keeps the answer for the Session (an
// ACL change after it, which only an ADMIN holder can make and the rule
// keeps ADMIN from others, is seen by the next Session); a directory found
// missing is made with the Session's ACL and trusted.
func TestDirACLCheckedOnce(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create("/once", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	try := func(s *Session, dir string) error {
		t.Helper()
		q, err := NewQueue(s, dir, []string{"lock-"}, FirstHolds)
		if err != nil {
			t.Fatal(err)
		}
		l, err := q.TryAcquire(ctx, "lock-", nil)
		if err == nil {
			err = l.Release(ctx)
		}
		return err
	}

	open := connect(t, cl.Servers())
	in.Create("/once/open", nil)
	if err := try(open, "/once/open"); err != nil {
		t.Fatal(err)
	}
	if open.dirs.enabled(open.cfg.acl) || open.dirs.ok != nil {
		t.Fatal("the default ACL checked a directory")
	}

	owner := []zk.ACL{zk.DigestACL(zk.PermAll, "locker", "secret")[0], zk.WorldACL(zk.PermRead)[0]}
	opts := []Option{WithAuth("digest", []byte("locker:secret")), WithACL(owner)}
	s := connect(t, cl.Servers(), opts...)
	in.Create("/once/lock", owner)
	if err := try(s, "/once/lock"); err != nil {
		t.Fatal(err)
	}
	adir := s.abs("/once/lock")
	if !s.dirs.trusted(adir) {
		t.Fatal("the checked directory is not kept")
	}
	if _, err := s.conn.SetACL(adir, zk.WorldACL(zk.PermAll), -1); err != nil {
		t.Fatal(err)
	}
	if err := try(s, "/once/lock"); err != nil {
		t.Fatalf("the same Session read the ACL again: %v", err)
	}
	if err := try(connect(t, cl.Servers(), opts...), "/once/lock"); !errors.Is(err, ErrUntrustedDir) {
		t.Fatalf("a new Session: %v, want ErrUntrustedDir", err)
	}

	// The lease is held while the directory's ACL is read: once it is
	// released, the server's container reaper may delete the directory.
	mq, err := NewQueue(s, "/once/made", []string{"lock-"}, FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	l, err := mq.TryAcquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.dirs.trusted(s.abs("/once/made")) {
		t.Fatal("the directory the Session made is not trusted")
	}
	if acl, _, err := s.conn.GetACL(s.abs("/once/made")); err != nil || len(acl) != 2 || acl[0] != owner[0] {
		t.Fatalf("the directory made has ACL %s (%v)", describeACL(acl), err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
