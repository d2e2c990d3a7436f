package fencezk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/resource/fencezk"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

const libPass = "libsecret"

var libACL = zk.DigestACL(zk.PermAll, "libuser", libPass)

// connectLib connects a Session as the trial did: digest user libuser, and
// an ACL for libuser alone. The znodes it leaves below dirs (which an
// anonymous cleanup could not delete) are deleted at the test's end.
func connectLib(t *testing.T, cl *zktest.Cluster, dirs ...string) *zookeeper.Session {
	t.Helper()
	s := connect(t, cl, zookeeper.WithAuth("digest", []byte("libuser:"+libPass)), zookeeper.WithACL(libACL))
	t.Cleanup(func() { // before the Session's Close (cleanups run last first)
		for _, d := range dirs {
			deleteTree(s.Conn(), cl.Chroot()+d)
		}
	})
	return s
}

func deleteTree(conn *zk.Conn, p string) {
	if err := conn.Delete(p, -1); errors.Is(err, zk.ErrNotEmpty) {
		kids, _, _ := conn.Children(p)
		for _, k := range kids {
			deleteTree(conn, p+"/"+k)
		}
		_ = conn.Delete(p, -1)
	}
}

// describe names acl's entries without a digest's hash (test output shows
// no secret).
func describe(acl []zk.ACL) string {
	parts := make([]string, len(acl))
	for i, e := range acl {
		id, _, _ := strings.Cut(e.ID, ":")
		parts[i] = fmt.Sprintf("%s:%s:%d", e.Scheme, id, e.Perms)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func aclOf(t *testing.T, conn *zk.Conn, p string) []zk.ACL {
	t.Helper()
	acl, _, err := conn.GetACL(p)
	if err != nil {
		t.Fatalf("getAcl %s: %v", p, err)
	}
	return acl
}

// TestRegisterTakesTheSessionACL is the trial's scenario (issue 23 follow-up):
// a Session with digest auth and WithACL(libuser only) made its register
// world-writable, an anonymous client lowered its token to 1 with a plain
// setData, and a stale write with token 2 then landed. The register and its
// parent now carry the Session's ACL: the anonymous setData and delete are
// refused (NoAuth) and the stale write with them.
func TestRegisterTakesTheSessionACL(t *testing.T) {
	cl := zktest.Shared(t)
	s := connectLib(t, cl, "/fz")
	anon := zktest.Inspect(t, cl).Conn()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRegister(t, s, "/fz/reg")
	if _, err := r.Write(ctx, 3, []byte("by 3")); err != nil {
		t.Fatal(err)
	}
	reg := cl.Chroot() + "/fz/reg"
	for _, p := range []string{reg, cl.Chroot() + "/fz"} {
		if acl := aclOf(t, s.Conn(), p); !slices.Equal(acl, libACL) {
			t.Errorf("%s has ACL %s, want the Session's %s", p, describe(acl), describe(libACL))
		}
	}
	if _, err := anon.Set(reg, []byte("token=1\n"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("an anonymous setData lowering the mark: %v, want NoAuth", err)
	}
	if err := anon.Delete(reg, -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("an anonymous delete of the register: %v, want NoAuth", err)
	}
	var se *fence.StaleError
	if _, err := r.Write(ctx, 2, []byte("by 2")); !errors.As(err, &se) || se.Highest != 3 {
		t.Fatalf("a stale write with token 2: %v, want refused with 3", err)
	}
	if v, err := r.Read(ctx); err != nil || v.Token != 3 || string(v.Data) != "by 3" {
		t.Fatalf("the register holds %+v (%v)", v, err)
	}
}

// TestRegisterWithACLOverrides: fencezk.WithACL, not the Session's ACL, is
// what the register and its parent are made with and what an existing one
// is checked against: an open override on a restrictive Session writes an
// open register as before (the caller's choice), a restrictive override on
// an open Session refuses one (old code: written).
func TestRegisterWithACLOverrides(t *testing.T) {
	cl := zktest.Shared(t)
	s := connectLib(t, cl, "/ov")
	open := connect(t, cl)
	in := zktest.Inspect(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	in.Create("/ov/open/reg", nil) // before /ov gets WithACL's ACL below
	readable := append(slices.Clone(libACL), zk.WorldACL(zk.PermRead)...)
	r, err := fencezk.New(s, "/ov/mine/reg", fencezk.WithACL(readable))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/ov/mine/reg", "/ov/mine"} {
		if acl := aclOf(t, s.Conn(), cl.Chroot()+p); !slices.Equal(acl, readable) {
			t.Errorf("%s has ACL %s, want WithACL's %s", p, describe(acl), describe(readable))
		}
	}

	r, err = fencezk.New(s, "/ov/open/reg", fencezk.WithACL(zk.WorldACL(zk.PermAll)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write(ctx, 1, nil); err != nil {
		t.Fatalf("an open WithACL on a restrictive Session: %v", err)
	}

	r, err = fencezk.New(open, "/ov/open/reg", fencezk.WithACL(libACL))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write(ctx, 2, nil); !errors.Is(err, zookeeper.ErrUntrustedDir) {
		t.Fatalf("a restrictive WithACL on an open Session, existing open register: %v, want ErrUntrustedDir", err)
	}
}

// TestRegisterRefusesAnOpenExisting: a register (or its parent) that
// exists already keeps its ACL, whatever the writer's. With a restrictive
// ACL, a write into one that grants others WRITE, CREATE, DELETE or ADMIN
// (the parent: CREATE, DELETE or ADMIN) is refused with an *ACLError that
// names the path and no secret, and nothing is written (old code: written,
// and the owner of the grant could lower the mark). One made with the ACL
// (another process's, earlier) is accepted.
func TestRegisterRefusesAnOpenExisting(t *testing.T) {
	cl := zktest.Shared(t)
	s := connectLib(t, cl, "/ex")
	in := zktest.Inspect(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in.Create("/ex", nil) // world: the cases below make their own parents
	world := func(perms int32) []zk.ACL { return append(slices.Clone(libACL), zk.WorldACL(perms)...) }
	hash := strings.TrimPrefix(libACL[0].ID, "libuser:")
	for _, c := range []struct {
		name      string
		dir, reg  []zk.ACL // reg nil: no register yet
		badParent bool     // the parent is refused, not the register
	}{
		{"open parent", zk.WorldACL(zk.PermAll), nil, true},
		{"open parent, own register", zk.WorldACL(zk.PermAll), libACL, true},
		{"parent world d", world(zk.PermDelete | zk.PermRead), nil, true},
		{"open register", libACL, zk.WorldACL(zk.PermAll), false},
		{"register world w", libACL, world(zk.PermWrite | zk.PermRead), false},
		{"register world a", libACL, world(zk.PermAdmin), false},
		{"register, same user other password", libACL, append(zk.DigestACL(zk.PermAll, "libuser", "guessed"), zk.WorldACL(zk.PermRead)...), false},
		{"register without write for us", libACL, zk.DigestACL(zk.PermAll&^zk.PermWrite, "libuser", libPass), false},
		{"own", libACL, libACL, false},
		{"own, world r", world(zk.PermRead | zk.PermWrite), world(zk.PermRead), false},
	} {
		dir := "/ex/" + strings.NewReplacer(" ", "-", ",", "").Replace(c.name)
		reg := dir + "/reg"
		if _, err := s.Conn().Create(cl.Chroot()+dir, nil, 0, c.dir); err != nil {
			t.Fatal(err)
		}
		if c.reg != nil {
			if _, err := s.Conn().Create(cl.Chroot()+reg, []byte("token=1\n"), 0, c.reg); err != nil {
				t.Fatal(err)
			}
		}
		r := newRegister(t, s, reg)
		_, err := r.Write(ctx, 5, []byte("by 5"))
		ok := strings.HasPrefix(c.name, "own") && !c.badParent
		var ae *fencezk.ACLError
		switch {
		case ok && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case ok:
		case err == nil:
			t.Errorf("%s: written", c.name)
		case !errors.As(err, &ae) || !errors.Is(err, zookeeper.ErrUntrustedDir) || !errors.Is(err, recipe.ErrNoPermission) || !recipe.Permanent(err):
			t.Errorf("%s: %v, want an *ACLError matching ErrUntrustedDir and ErrNoPermission", c.name, err)
		case ae.Register != reg || (ae.Path == dir) != c.badParent || (ae.Path != dir && ae.Path != reg):
			t.Errorf("%s: %+v names the wrong znode", c.name, ae)
		case !strings.Contains(err.Error(), ae.Path) || strings.Contains(err.Error(), libPass) || strings.Contains(err.Error(), hash):
			t.Errorf("%s: the error does not name the path, or shows the password or its hash: %v", c.name, err)
		}
		if raw, _, err := s.Conn().Get(cl.Chroot() + reg); !ok && err == nil && string(raw) != "token=1\n" {
			t.Errorf("%s: refused, but the register holds %q", c.name, raw)
		}
	}
}

// TestRegisterHiddenDigest: ZooKeeper shows a session without ADMIN on a
// znode its digest entries as "user:x", so a Session whose ACL keeps ADMIN
// from itself cannot tell its own existing register from an impostor's:
// refused, with the reason, until the ACL grants ADMIN. The register it
// creates itself is trusted by that Register.
func TestRegisterHiddenDigest(t *testing.T) {
	cl := zktest.Shared(t)
	noAdmin := zk.DigestACL(zk.PermAll&^zk.PermAdmin, "libuser", libPass)
	s := connect(t, cl, zookeeper.WithAuth("digest", []byte("libuser:"+libPass)), zookeeper.WithACL(noAdmin))
	t.Cleanup(func() { deleteTree(s.Conn(), cl.Chroot()+"/hd") })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRegister(t, s, "/hd/reg")
	for tok := fence.Token(1); tok <= 2; tok++ {
		if _, err := r.Write(ctx, tok, nil); err != nil {
			t.Fatalf("write %d into the register this Register made: %v", tok, err)
		}
	}
	_, err := newRegister(t, s, "/hd/reg").Write(ctx, 3, nil)
	if !errors.Is(err, zookeeper.ErrUntrustedDir) || !strings.Contains(err.Error(), "ADMIN") {
		t.Fatalf("another Register: %v, want ErrUntrustedDir saying why", err)
	}
}

// TestRegisterRemadeIsCheckedAgain: a Register checks a register once, but
// one deleted and made again since (another czxid) is checked again: here
// re-made open with a lower mark, by a raw client with the owner's
// credentials (an old version of a program, say).
func TestRegisterRemadeIsCheckedAgain(t *testing.T) {
	cl := zktest.Shared(t)
	s := connectLib(t, cl, "/rm")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRegister(t, s, "/rm/reg")
	for tok := fence.Token(5); tok <= 6; tok++ {
		if _, err := r.Write(ctx, tok, nil); err != nil {
			t.Fatal(err)
		}
	}
	reg := cl.Chroot() + "/rm/reg"
	if err := s.Conn().Delete(reg, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Conn().Create(reg, []byte("token=1\n"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	var ae *fencezk.ACLError
	if _, err := r.Write(ctx, 2, nil); !errors.As(err, &ae) || ae.Path != "/rm/reg" {
		t.Fatalf("a write into the re-made open register: %v, want an *ACLError", err)
	}
}
