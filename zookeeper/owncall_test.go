package zookeeper

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestCallWatchesSetAgain: the watches calls set (data, child, exist) are
// set again on the next connection of the same session, with the zxid the
// client last saw, as go-zookeeper's own: a change made while the client
// was cut off fires them at the reconnection, one made after fires them
// then; once fired, none is kept.
func TestCallWatchesSetAgain(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	s := connect(t, cl.Servers(), WithDialer(p.Dial), WithSessionTimeout(8*time.Second))
	other := connect(t, cl.Servers())
	conn := other.Conn()
	node, dir, missing := s.chroot+"/callw", s.chroot+"/callw-dir", s.chroot+"/callw-missing"
	for _, n := range []string{node, dir} {
		if _, err := conn.Create(n, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	st, err := s.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var q []StreamItem
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.stat(ctx, node, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.children(ctx, dir, true); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := s.exists(ctx, missing, true); err != nil || ok {
		t.Fatalf("exists: %v %v", ok, err)
	}
	for _, path := range []string{node, dir, missing} {
		if !s.wire.hub.watched(path) {
			t.Fatalf("no watch kept on %s", path)
		}
	}

	p.Cut()
	nextItem(t, st, &q, func(it StreamItem) bool { return it.Kind == StreamClosed })
	if _, err := s.children(ctx, dir, false); !errors.Is(err, errNotConnected) {
		t.Errorf("a call while cut off: %v, want errNotConnected", err)
	}
	if _, err := conn.Set(node, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(missing, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	p.Resume()
	event := func(typ zk.EventType, path string) {
		t.Helper()
		nextItem(t, st, &q, func(it StreamItem) bool {
			return it.Kind == StreamEvent && it.Type == typ && s.chroot+it.Path == path
		})
	}
	event(zk.EventNodeDataChanged, node) // changed while cut off
	event(zk.EventNodeCreated, missing)
	if _, err := conn.Create(dir+"/c", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	event(zk.EventNodeChildrenChanged, dir) // set again, unfired
	for _, path := range []string{node, dir, missing} {
		if s.wire.hub.watched(path) {
			t.Errorf("a fired watch is still kept on %s", path)
		}
	}
}

// TestCallLeftInFlight: a caller whose context ends stops waiting at once;
// the request stays in flight and its reply is handled (the watch it set
// is kept); a call on a closed Session fails.
func TestCallLeftInFlight(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	s := connect(t, cl.Servers(), WithDialer(p.Dial), WithSessionTimeout(8*time.Second))
	path := s.chroot + "/callleft"
	if _, err := s.Conn().Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	p.SetLatency(time.Second) // each way
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := s.stat(ctx, path, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stat: %v, want the deadline", err)
	}
	if d := time.Since(start); d > time.Second { // the reply takes 2 s
		t.Errorf("the caller waited %v after its deadline", d)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !s.wire.hub.watched(path) {
		if time.Now().After(deadline) {
			t.Fatal("the reply of the call left in flight was not handled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.SetLatency(0)
	s.Close()
	if _, err := s.stat(context.Background(), path, false); err == nil {
		t.Error("a call on a closed Session succeeded")
	}
}
