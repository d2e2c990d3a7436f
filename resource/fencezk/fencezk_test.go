package fencezk_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/resource/fencezk"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func TestMain(m *testing.M) { zktest.Main(m) }

func connect(t *testing.T, cl *zktest.Cluster, opts ...zookeeper.Option) *zookeeper.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts = append([]zookeeper.Option{zookeeper.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)
	s, err := zookeeper.Connect(ctx, cl.Servers(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newRegister(t *testing.T, s *zookeeper.Session, path string) *fencezk.Register {
	t.Helper()
	r, err := fencezk.New(s, path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRegisterRejectsAStaleHolder is the 33/34 scenario on a znode: the
// register is created (parents too) by the first write, a lower token is
// refused with the stored one, an equal one accepted, and bad input refused.
func TestRegisterRejectsAStaleHolder(t *testing.T) {
	cl := zktest.Shared(t)
	s := connect(t, cl)
	ctx := context.Background()
	r := newRegister(t, s, "/app/registers/report")

	v, err := r.Read(ctx)
	if err != nil || v.Version != -1 || v.Token != 0 {
		t.Fatalf("Read of a missing register: %+v, %v", v, err)
	}
	prev, err := r.Write(ctx, 34, []byte("by 34"))
	if err != nil || prev.Token != 0 || prev.Version != -1 {
		t.Fatalf("first write: %+v, %v; want the missing register, as Read reports it", prev, err)
	}
	prev, err = r.Write(ctx, 33, []byte("by 33"))
	var se *fence.StaleError
	if !errors.As(err, &se) || !errors.Is(err, fence.ErrStale) || se.Highest != 34 || se.Resource != "/app/registers/report" || prev.Token != 34 {
		t.Fatalf("stale write: %+v, %v", prev, err)
	}
	prev, err = r.Write(ctx, 34, []byte("by 34 again"))
	if err != nil || string(prev.Data) != "by 34" || prev.Version != 0 {
		t.Fatalf("equal token: %+v, %v", prev, err)
	}
	v, err = r.Read(ctx)
	if err != nil || v.Token != 34 || string(v.Data) != "by 34 again" || v.Version != 1 {
		t.Fatalf("Read: %+v, %v", v, err)
	}
	raw, _, err := s.Conn().Get(cl.Chroot() + "/app/registers/report")
	if err != nil || string(raw) != "token=34\nby 34 again" {
		t.Fatalf("the znode holds %q (%v)", raw, err)
	}

	if _, err := r.Write(ctx, 0, []byte("x")); !errors.Is(err, fence.ErrNoToken) {
		t.Fatalf("zero token: %v", err)
	}
	for _, p := range []string{"", "rel", "/a/", "/zookeeper/x", "/a//b"} {
		if _, err := fencezk.New(s, p); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("New(%q): %v", p, err)
		}
	}
	if _, err := s.Conn().Create(cl.Chroot()+"/foreign", []byte("someone else's"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	foreign := newRegister(t, s, "/foreign")
	if _, err := foreign.Write(ctx, 50, []byte("x")); !errors.Is(err, fencezk.ErrNotRegister) {
		t.Fatalf("a znode in another format: %v", err)
	}
	if raw, _, _ := s.Conn().Get(cl.Chroot() + "/foreign"); string(raw) != "someone else's" {
		t.Fatalf("the foreign znode was overwritten: %q", raw)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Write(cctx, 35, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

// TestApply: other znodes' writes land in one multi with the register's
// versioned setData, only with a token at least the register's.
func TestApply(t *testing.T) {
	cl := zktest.Shared(t)
	s := connect(t, cl)
	ctx := context.Background()
	r := newRegister(t, s, "/fence")
	if _, err := r.Write(ctx, 10, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	acl := zk.WorldACL(zk.PermAll)
	prev, res, err := r.Apply(ctx, 12,
		&zk.CreateRequest{Path: "/config", Data: []byte("v1"), Acl: acl},
		&zk.CreateRequest{Path: "/config/item-", Data: []byte("a"), Acl: acl, Flags: zk.FlagSequence})
	if err != nil || prev.Token != 10 || len(res) != 3 || res[1].String != "/config" || res[2].String != "/config/item-0000000000" {
		t.Fatalf("Apply: %+v %+v %v", prev, res, err)
	}
	v, _ := r.Read(ctx)
	if v.Token != 12 || string(v.Data) != "kept" {
		t.Fatalf("the register after Apply: %+v", v)
	}
	// Stale: nothing lands.
	_, _, err = r.Apply(ctx, 11, &zk.SetDataRequest{Path: "/config", Data: []byte("stale"), Version: -1})
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Apply: %v", err)
	}
	// One of the ops refused: nothing lands, not even the token.
	_, _, err = r.Apply(ctx, 13,
		&zk.SetDataRequest{Path: "/config", Data: []byte("v2"), Version: -1},
		&zk.CreateRequest{Path: "/config", Acl: acl})
	if !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("a refused op: %v", err)
	}
	if data, _, _ := s.Conn().Get(cl.Chroot() + "/config"); string(data) != "v1" {
		t.Fatalf("/config holds %q after a stale or refused Apply", data)
	}
	if v, _ := r.Read(ctx); v.Token != 12 {
		t.Fatalf("a refused Apply raised the register to %v", v.Token)
	}
	for _, ops := range [][]any{nil, {"not an op"}, {&zk.DeleteRequest{Path: "relative"}}, {&zk.SetDataRequest{Path: "/fence"}}} {
		if _, _, err := r.Apply(ctx, 20, ops...); !errors.Is(err, fencezk.ErrBadOp) {
			t.Errorf("Apply(%v): %v", ops, err)
		}
	}
}

// TestUncertain: a write whose reply is lost reports fence.ErrUncertain,
// whether the server applied it (request sent, then the connection cut) or
// not (cut before sending): the client cannot tell. A write sent before the
// cut can also have its reply read before the cut (a fast server, a slow
// client): that is a plain success, which must report what it replaced and
// be read back at once. Either way the register ends as the fault decides:
// holding the write (token 2, one version on) if it was sent, unchanged if
// it was not.
func TestUncertain(t *testing.T) {
	cl := zktest.Shared(t)
	var fault atomic.Int32 // a zktest.Fault for the next setData
	hook := zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if op == zktest.OpSetData {
			return zktest.Fault(fault.Swap(int32(zktest.Pass)))
		}
		return zktest.Pass
	})
	s := connect(t, cl, zookeeper.WithDialer(hook), zookeeper.WithSessionTimeout(4*time.Second))
	ctx := context.Background()
	r := newRegister(t, s, "/reg")
	if _, err := r.Write(ctx, 1, []byte("a")); err != nil {
		t.Fatal(err)
	}
	// read returns the register's value once done accepts it (a read error
	// after the cut is retried), or the last one read after 10 s.
	read := func(done func(fencezk.Value) bool) (v fencezk.Value) {
		var err error
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if v, err = r.Read(ctx); err == nil && done(v) {
				return v
			}
		}
		if err != nil {
			t.Fatalf("reading the register: %v", err)
		}
		return v
	}
	same := func(a, b fencezk.Value) bool {
		return a.Token == b.Token && string(a.Data) == string(b.Data) && a.Version == b.Version
	}
	for _, c := range []struct {
		f      zktest.Fault
		landed bool
	}{{zktest.SendAndCut, true}, {zktest.DropAndCut, false}} {
		before := read(func(fencezk.Value) bool { return true })
		want := before
		if c.landed {
			want = fencezk.Value{Token: 2, Data: []byte("after " + c.f.String()), Version: before.Version + 1}
		}
		fault.Store(int32(c.f))
		prev, err := r.Write(ctx, 2, want.Data)
		var v fencezk.Value
		switch {
		case err == nil && c.landed:
			// The reply beat the cut: a success like any other, so the
			// register holds the write from now on (the session reads its
			// own writes, also after the reconnection).
			if !same(prev, before) {
				t.Fatalf("%v: succeeded, replacing %+v; the register held %+v", c.f, prev, before)
			}
			v = read(func(fencezk.Value) bool { return true })
		case errors.Is(err, fence.ErrUncertain):
			// Read after the reconnection; a write that was sent may be
			// applied a moment later, so wait for it a while.
			v = read(func(v fencezk.Value) bool { return !c.landed || same(v, want) })
		default:
			t.Fatalf("%v: %v, want fence.ErrUncertain", c.f, err)
		}
		if !same(v, want) {
			t.Fatalf("%v (%v): the register holds %+v, want %+v", c.f, err, v, want)
		}
		t.Logf("%v: %v; landed %v", c.f, err, c.landed)
	}
}
