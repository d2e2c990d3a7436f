package fencezk_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestMissingChroot: a session whose chroot does not exist yet works as it
// does for the recipes: the first write creates the chroot and the
// register's parents, whether through Write or Apply, and whether the
// register is at the chroot's top or deeper.
func TestMissingChroot(t *testing.T) {
	cl := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(chroot string) *zookeeper.Session {
		s, err := zookeeper.Connect(ctx, []string{cl.Addrs()[0] + cl.Chroot() + chroot},
			zookeeper.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}

	r := newRegister(t, open("/app1"), "/data/report")
	prev, err := r.Write(ctx, 5, []byte("totals"))
	if err != nil || prev.Version != -1 || prev.Token != 0 {
		t.Fatalf("first write under a missing chroot: %+v, %v", prev, err)
	}
	if v, err := r.Read(ctx); err != nil || v.Token != 5 || string(v.Data) != "totals" || v.Version != 0 {
		t.Fatalf("Read: %+v, %v", v, err)
	}

	top := newRegister(t, open("/app2/nested"), "/report")
	if _, err := top.Write(ctx, 5, []byte("x")); err != nil {
		t.Fatalf("a register at the top of a missing two-level chroot: %v", err)
	}

	s := open("/app3")
	applied := newRegister(t, s, "/fence/reg")
	_, res, err := applied.Apply(ctx, 5, &zk.CreateRequest{Path: "/fence/config", Data: []byte("v1"), Acl: zk.WorldACL(zk.PermAll)})
	if err != nil || len(res) != 2 || res[0].String != "/fence/reg" || res[1].String != "/fence/config" {
		t.Fatalf("Apply under a missing chroot: %+v, %v", res, err)
	}
	if data, _, err := s.Conn().Get(cl.Chroot() + "/app3/fence/config"); err != nil || string(data) != "v1" {
		t.Fatalf("Apply's create: %q, %v", data, err)
	}

	// A chroot that cannot be created: the error names it.
	if _, err := s.Conn().Create(cl.Chroot()+"/readonly", nil, 0, zk.WorldACL(zk.PermRead|zk.PermAdmin)); err != nil {
		t.Fatal(err)
	}
	_, err = newRegister(t, open("/readonly/app"), "/data/report").Write(ctx, 5, []byte("x"))
	if !errors.Is(err, recipe.ErrNoPermission) || !strings.Contains(err.Error(), "chroot znode "+cl.Chroot()+"/readonly/app") {
		t.Fatalf("a chroot below a read-only znode: %v", err)
	}
	t.Log(err)
}

// TestOversizedWrite: a write or an Apply too large for the session's
// packet limit is refused before it is sent, with an error matching
// recipe.ErrTooLarge (not fence.ErrUncertain: nothing was sent); the
// connection never drops and nothing lands.
func TestOversizedWrite(t *testing.T) {
	cl := zktest.Shared(t)
	s := connect(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	states := s.Listen(ctx)
	r := newRegister(t, s, "/big")

	_, err := r.Write(ctx, 5, bytes.Repeat([]byte("z"), 2<<20))
	if !errors.Is(err, recipe.ErrTooLarge) || errors.Is(err, fence.ErrUncertain) {
		t.Fatalf("a 2 MiB write: %v; want recipe.ErrTooLarge and not fence.ErrUncertain", err)
	}
	t.Log(err)
	if v, err := r.Read(ctx); err != nil || v.Version != -1 {
		t.Fatalf("after the refused write the register is %+v (%v)", v, err)
	}
	if _, err := r.Write(ctx, 5, []byte("small")); err != nil {
		t.Fatal(err)
	}
	acl := zk.WorldACL(zk.PermAll)
	for name, ops := range map[string][]any{
		"one op too large": {&zk.CreateRequest{Path: "/blob", Data: make([]byte, 2<<20), Acl: acl}},
		"ops too large together": {&zk.CreateRequest{Path: "/blob", Data: make([]byte, 400<<10), Acl: acl},
			&zk.SetDataRequest{Path: "/blob", Data: make([]byte, 400<<10), Version: -1},
			&zk.SetDataRequest{Path: "/blob", Data: make([]byte, 400<<10), Version: -1}},
	} {
		_, _, err := r.Apply(ctx, 6, ops...)
		if !errors.Is(err, recipe.ErrTooLarge) || errors.Is(err, fence.ErrUncertain) {
			t.Errorf("Apply, %s: %v; want recipe.ErrTooLarge and not fence.ErrUncertain", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
	if v, err := r.Read(ctx); err != nil || v.Token != 5 || string(v.Data) != "small" {
		t.Fatalf("after the refused Apply the register is %+v (%v)", v, err)
	}
	if _, _, err := s.Conn().Get(cl.Chroot() + "/blob"); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("a refused Apply's create landed: %v", err)
	}
	select {
	case c := <-states:
		t.Fatalf("the connection changed state: %+v", c)
	default:
	}
}
