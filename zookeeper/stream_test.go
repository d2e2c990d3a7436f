package zookeeper

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// nextItem waits for the Stream's next item that keep accepts.
func nextItem(t *testing.T, st *Stream, q *[]StreamItem, keep func(StreamItem) bool) StreamItem {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		for len(*q) > 0 {
			it := (*q)[0]
			*q = (*q)[1:]
			if keep(it) {
				return it
			}
		}
		select {
		case <-st.Wake():
			*q = append(*q, st.Next()...)
		case <-deadline:
			t.Fatal("no item within 10s")
		}
	}
}

// TestStreamOrder: a persistent recursive watch's events and the replies
// to the Stream's reads arrive in the order the server sent them, below
// the chroot, beside go-zookeeper's own requests; a cut connection gives
// StreamClosed then StreamConnected, and the watch is added again.
func TestStreamOrder(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	s := connect(t, cl.Servers(), WithDialer(p.Dial), WithSessionTimeout(6*time.Second))
	conn := s.Conn()
	if _, err := conn.Create(s.chroot+"/stream", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	st, err := s.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var q []StreamItem
	id, err := st.AddWatch("/stream", true)
	if err != nil {
		t.Fatal(err)
	}
	if it := nextItem(t, st, &q, func(StreamItem) bool { return true }); it.Kind != StreamReply || it.ID != id || it.Err != nil {
		t.Fatalf("addWatch: %+v", it)
	}
	for i := range 50 {
		path, err := conn.Create(s.chroot+"/stream/n", []byte{byte(i)}, zk.FlagSequence, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		path = path[len(s.chroot):]
		ev := nextItem(t, st, &q, func(StreamItem) bool { return true })
		if ev.Kind != StreamEvent || ev.Type != zk.EventNodeCreated || ev.Path != path {
			t.Fatalf("event %d: %+v, want created %s", i, ev, path)
		}
		rid, err := st.GetData(path, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Set(s.chroot+path, []byte("x"), -1); err != nil {
			t.Fatal(err)
		}
		r := nextItem(t, st, &q, func(StreamItem) bool { return true })
		e := nextItem(t, st, &q, func(StreamItem) bool { return true })
		// The getData was sent before the set: its reply comes first and
		// shows the data before it.
		if r.Kind != StreamReply || r.ID != rid || r.Err != nil || len(r.Data) != 1 || r.Data[0] != byte(i) || r.Path != path {
			t.Fatalf("reply %d: %+v", i, r)
		}
		if e.Kind != StreamEvent || e.Type != zk.EventNodeDataChanged || e.Path != path {
			t.Fatalf("event %d: %+v, want changed %s", i, e, path)
		}
	}
	if rid, err := st.Children("/stream", false); err != nil {
		t.Fatal(err)
	} else if r := nextItem(t, st, &q, func(StreamItem) bool { return true }); r.ID != rid || len(r.Names) != 50 {
		t.Fatalf("children: %+v", r)
	}
	if rid, err := st.GetData("/stream/none", false); err != nil {
		t.Fatal(err)
	} else if r := nextItem(t, st, &q, func(StreamItem) bool { return true }); r.ID != rid || !errors.Is(r.Err, zk.ErrNoNode) {
		t.Fatalf("getData of a missing node: %+v", r)
	}

	p.Cut()
	nextItem(t, st, &q, func(it StreamItem) bool { return it.Kind == StreamClosed })
	if _, err := st.GetData("/stream", false); !errors.Is(err, ErrNotConnected) {
		t.Errorf("GetData while cut: %v, want ErrNotConnected", err)
	}
	p.Resume()
	if it := nextItem(t, st, &q, func(it StreamItem) bool { return it.Kind == StreamConnected }); it.Session != s.ID() {
		t.Errorf("connected to session %x, want %x", it.Session, s.ID())
	}
	if _, err := st.AddWatch("/stream", true); err != nil {
		t.Fatal(err)
	}
	nextItem(t, st, &q, func(it StreamItem) bool { return it.Kind == StreamReply })
	if err := conn.Delete(s.chroot+"/stream/none2", -1); !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	kids, _, err := conn.Children(s.chroot + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		if err := conn.Delete(s.chroot+"/stream/"+k, -1); err != nil {
			t.Fatal(err)
		}
		if ev := nextItem(t, st, &q, func(StreamItem) bool { return true }); ev.Type != zk.EventNodeDeleted || ev.Path != "/stream/"+k {
			t.Fatalf("after the reconnection: %+v, want deleted /stream/%s", ev, k)
		}
	}
}
