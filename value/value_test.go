package value_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/value"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func opCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newValue(t *testing.T, s *zookeeper.Session, p string) *value.Value {
	t.Helper()
	v, err := value.New(s, p)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRefused: bad paths, a nil session and bad versions are refused
// before anything is sent.
func TestRefused(t *testing.T) {
	cl := zktest.Shared(t)
	s := rtest.Connect(t, cl)
	for _, p := range []string{"", "rel", "/a/", "/zookeeper/x", "/a/_c_0123456789abcdef0123456789abcdef-lock-0000000001"} {
		if _, err := value.New(s, p); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("New(%q): %v, want recipe.ErrInvalidPath", p, err)
		}
	}
	if _, err := value.New(nil, "/v"); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("New(nil session): %v, want recipe.ErrBadOption", err)
	}
	v := newValue(t, s, "/values/refused")
	if _, err := v.TrySet(opCtx(t), -1, nil); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("TrySet(-1): %v, want recipe.ErrBadOption", err)
	}
	if _, err := v.TrySet(opCtx(t), 1<<31, nil); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("TrySet(1<<31): %v, want recipe.ErrBadOption", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := v.TrySet(ctx, 0, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("TrySet with a done ctx: %v, want context.Canceled", err)
	}
	if ok, _, _ := zktest.Inspect(t, cl).Conn().Exists(cl.Chroot() + "/values"); ok {
		t.Error("a refused TrySet made the value's parent")
	}
}

// TestVersionsAndRevs: Version is the data version plus 1, Rev the mzxid,
// a missing value's Rev a zxid at which it was missing (at or after its
// delete, before its next create); the parents are containers.
func TestVersionsAndRevs(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s := rtest.Connect(t, cl)
	v := newValue(t, s, "/values/a/b")
	x, err := v.TrySet(opCtx(t), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := in.Stat("/values/a/b")
	if x.Version != 1 || x.Rev != st.Mzxid || x.Data == nil || len(x.Data) != 0 {
		t.Errorf("TrySet(0, nil) = %+v, want Version 1, Rev %d (the mzxid), empty non-nil Data", x, st.Mzxid)
	}
	if pst := in.Stat("/values/a"); pst == nil || pst.NumChildren != 1 {
		t.Errorf("parent %+v, want it made, with the value as its one child", pst)
	}
	y, err := v.TrySet(opCtx(t), x.Version, []byte("2"))
	if err != nil || y.Version != 2 || y.Rev <= x.Rev {
		t.Fatalf("TrySet(1) = %+v, %v; want Version 2 and a larger Rev", y, err)
	}
	in.Delete("/values/a/b")
	gone, err := v.Get(opCtx(t))
	if err != nil || gone.Version != 0 || gone.Data != nil || gone.Rev <= y.Rev {
		t.Fatalf("Get after the delete = %+v, %v; want the value missing with a Rev above %d", gone, err, y.Rev)
	}
	z, err := v.TrySet(opCtx(t), 0, []byte("3"))
	if err != nil || z.Version != 1 || z.Rev <= gone.Rev {
		t.Fatalf("TrySet(0) after the delete = %+v, %v; want Version 1 and a Rev above %d", z, err, gone.Rev)
	}
}

// TestWatchSurvivesSessionLoss: a watcher whose session expires, and one
// whose connection is cut, both deliver the writes made after that.
func TestWatchSurvivesSessionLoss(t *testing.T) {
	cl := zktest.Shared(t)
	tap := zktest.NewSessionTap()
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	ws := rtest.Connect(t, cl, zookeeper.WithDialer(tap.Dialer(p.Dial)), zookeeper.WithSessionTimeout(rtest.ConfTimeout))
	w := newValue(t, ws, "/values/watched")
	wr := newValue(t, rtest.Connect(t, cl), "/values/watched")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := w.Watch(ctx)
	expect(t, ch, 0, nil)
	x, err := wr.TrySet(opCtx(t), 0, []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	expect(t, ch, x.Version, []byte("1"))

	id, pw, ok := tap.Session()
	if !ok {
		t.Fatal("no session seen")
	}
	if _, err := zktest.ExpireSession(opCtx(t), cl.Addrs(), id, pw); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 3; i++ {
		if i == 3 {
			p.Cut()
			p.Resume()
		}
		if x, err = wr.TrySet(opCtx(t), x.Version, fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
		expect(t, ch, x.Version, fmt.Appendf(nil, "%d", i))
	}
	cancel()
	for range ch { // closes
	}
}

// expect reads ch until it delivers version with data, checking that Rev
// never goes back.
func expect(t *testing.T, ch <-chan recipe.Versioned, version int64, data []byte) {
	t.Helper()
	var last int64
	timeout := time.After(30 * time.Second)
	for {
		select {
		case x, ok := <-ch:
			if !ok {
				t.Fatal("the watch closed")
			}
			if x.Rev < last {
				t.Fatalf("Rev went back: %d after %d", x.Rev, last)
			}
			last = x.Rev
			if x.Version == version && string(x.Data) == string(data) {
				return
			}
		case <-timeout:
			t.Fatalf("no value at version %d with %q within 30 s", version, data)
		}
	}
}

// TestLostCreateReplyTakenOnce: a create whose reply is lost is found by
// the settle's read, not sent again (one create request on the wire), and
// a setData's likewise.
func TestLostCreateReplyTakenOnce(t *testing.T) {
	cl := zktest.Shared(t)
	var writes, cut atomic.Int32
	s := rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if op != zktest.OpCreate && op != zktest.OpSetData {
			return zktest.Pass
		}
		writes.Add(1)
		if cut.Swap(0) == 1 {
			return zktest.SendAndCut
		}
		return zktest.Pass
	})))
	v := newValue(t, s, "/lost") // its parent, the chroot, exists: the first create applies
	cut.Store(1)
	x, err := v.TrySet(opCtx(t), 0, []byte("a"))
	if err != nil || x.Version != 1 {
		t.Fatalf("TrySet(0) across a lost reply = %+v, %v; want Version 1", x, err)
	}
	cut.Store(1)
	if x, err = v.TrySet(opCtx(t), 1, []byte("b")); err != nil || x.Version != 2 {
		t.Fatalf("TrySet(1) across a lost reply = %+v, %v; want Version 2", x, err)
	}
	if n := writes.Load(); n != 2 {
		t.Errorf("%d writes sent for 2 TrySets whose replies were lost, want 2 (settled by reading, not sent again)", n)
	}
	if st := zktest.Inspect(t, cl).Stat("/lost"); st.Version != 1 {
		t.Errorf("data version %d, want 1: each write applied once", st.Version)
	}
}
