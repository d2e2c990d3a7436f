package zookeeper

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestZxidRaceAfterReconnect stresses go-zookeeper v1.0.4's data race on
// Conn.lastZxid (docs/zookeeper-client.md#the-zxid-kept-by-zkwire) under -race:
// sessions whose go-zookeeper holds no watch drop their connection, and
// requests queued meanwhile (a ChildrenW and a burst of reads) are written
// right after the handshake, so a watch can be registered, and replies
// processed, before go-zookeeper's connection loop builds its set-watches;
// goroutines burning CPU and allocating make that loop late. With zkwire
// keeping the zxid, go-zookeeper never writes lastZxid after a connect.
func TestZxidRaceAfterReconnect(t *testing.T) {
	// Not parallel: its goroutines burn the process's CPU.
	cl := zktest.Shared(t)
	const sessions, rounds, reads = 6, 15, 8
	stop := make(chan struct{})
	var burn sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		burn.Go(func() {
			var sink [][]byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				sink = append(sink[:0], make([]byte, 4<<10))
				runtime.Gosched()
			}
		})
	}
	defer burn.Wait()
	defer close(stop)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			s := connect(t, cl.Servers(), WithSessionTimeout(10*time.Second))
			dir := fmt.Sprintf("%s/zxidrace-%d", cl.Chroot(), i)
			if _, err := s.Conn().Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Error(err)
				return
			}
			for r := range rounds {
				if !zxidRaceRound(t, s, dir, r, reads) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// zxidRaceRound drops s's connection with no watch held, queues a
// ChildrenW of dir and reads, and fires the watch.
func zxidRaceRound(t *testing.T, s *Session, dir string, r, reads int) bool {
	conn := s.Conn()
	s.wire.dropConn()
	var wg sync.WaitGroup
	var ch <-chan zk.Event
	var err error
	wg.Go(func() { _, _, ch, err = conn.ChildrenW(dir) })
	for range reads {
		wg.Go(func() { conn.Exists(dir) })
	}
	wg.Wait()
	if err != nil { // the connection dropped under it: nothing registered
		return true
	}
	child := fmt.Sprintf("%s/c%d", dir, r)
	if _, err := conn.Create(child, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Error(err)
		return false
	}
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Error("the child watch did not fire")
		return false
	}
	if err := conn.Delete(child, -1); err != nil {
		t.Error(err)
		return false
	}
	return true
}
