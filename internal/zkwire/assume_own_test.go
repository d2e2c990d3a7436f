package zkwire_test

import (
	"encoding/binary"
	"strings"
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
)

// TestAssumption_OwnRequestsBesideGoZookeepers: requests of our own,
// written with Send while go-zookeeper's requests are in flight, are
// answered to the Stream and never reach go-zookeeper (no frame with an
// own xid handed up, no "unknown xid" log line, every go-zookeeper call
// answered); a watch event is handed up unchanged (go-zookeeper's watch
// fires) and copied to the Stream (docs/zookeeper-client.md#requests-of-our-own).
func TestAssumption_OwnRequestsBesideGoZookeepers(t *testing.T) {
	t.Parallel()
	logs := &logLines{}
	w := &wire{own: &ownRecorder{}}
	conn, _, chroot := connect(t, w, zk.WithLogger(logs))
	path := chroot + "/own-requests"
	if _, err := conn.Create(path, []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
		t.Fatal(err)
	}
	w.mu.Lock()
	up := w.ups[len(w.ups)-1]
	w.mu.Unlock()
	const n = 300
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := conn.Get(path); err != nil {
				errs <- err
			}
		}()
		if err := up.Send(zkwire.OwnRequest(zkwire.OwnXidMax-int32(i), zkwire.OpGetData, path, 0)); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("go-zookeeper's Get beside own requests: %v", err)
	}
	eventually(t, "every own request answered", func() bool {
		w.own.mu.Lock()
		defer w.own.mu.Unlock()
		return len(w.own.replies) == n
	})
	w.own.mu.Lock()
	for i, h := range w.own.replies {
		if h.Xid != zkwire.OwnXidMax-int32(i) || h.Err != 0 {
			t.Errorf("own reply %d: %+v, want xid %d in order, no error", i, h, zkwire.OwnXidMax-int32(i))
			break
		}
	}
	w.own.mu.Unlock()

	_, _, ch, err := conn.GetW(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Set(path, []byte("y"), -1); err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.Type != zk.EventNodeDataChanged || ev.Path != path {
		t.Errorf("go-zookeeper's watch: %+v", ev)
	}
	w.own.mu.Lock()
	if len(w.own.events) != 1 || w.own.events[0].Path != path || w.own.events[0].Type != int32(zk.EventNodeDataChanged) {
		t.Errorf("the Stream's events: %+v, want the one data change of %s", w.own.events, path)
	}
	w.own.mu.Unlock()

	_, handed := up.rc.read()
	for _, f := range handed {
		if len(f) >= 4 && int32(binary.BigEndian.Uint32(f[0:4])) <= zkwire.OwnXidMax {
			t.Fatalf("a frame with an own xid was handed up to go-zookeeper: % x", f[:min(len(f), 16)])
		}
	}
	logs.mu.Lock()
	for _, l := range logs.lines {
		if strings.Contains(l, "xid") {
			t.Errorf("go-zookeeper logged %q", l)
		}
	}
	logs.mu.Unlock()
	conn.Delete(path, -1)
}
