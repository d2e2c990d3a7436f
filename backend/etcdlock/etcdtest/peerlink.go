package etcdtest

import (
	"io"
	"net"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// peerNet carries the traffic between the members of a Cluster. Member i
// advertises the address of listen(i) as its peer URL; each connection
// accepted there is forwarded to i's real peer port through the
// serverkit.FaultProxy of the link (source, i), where source is the member
// that dialed it (peerSource; -1 when none is found, e.g. a probe of the
// test itself). A member talks to another over connections either one
// dialed, so cutting member i off both ways means blackholing every link
// whose source or destination is i: that is isolate.
type peerNet struct {
	c *Cluster

	mu       sync.Mutex
	links    map[[2]int]*serverkit.FaultProxy
	isolated int // -1: none
	lns      []net.Listener
	conns    map[net.Conn]struct{} // accepted, open
	closed   bool
	wg       sync.WaitGroup
}

func newPeerNet(c *Cluster) *peerNet {
	return &peerNet{c: c, links: map[[2]int]*serverkit.FaultProxy{}, isolated: -1, conns: map[net.Conn]struct{}{}}
}

// listen opens the listener that stands for member dst's peer URL and
// forwards to target, its real peer address; it returns the listener's
// address.
func (n *peerNet) listen(dst int, target string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	n.lns = append(n.lns, l)
	n.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			conn, err := l.Accept()
			if err != nil {
				return // closed by close
			}
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				n.forward(conn, dst, target)
			}()
		}
	}()
	return l.Addr().String(), nil
}

// forward carries conn, accepted for member dst, to target through the
// FaultProxy of its link, until either side closes it.
func (n *peerNet) forward(conn net.Conn, dst int, target string) {
	src := peerSource(conn, n.c)
	link, ok := n.track(conn, src, dst)
	if !ok {
		_ = conn.Close()
		return
	}
	defer n.untrack(conn)
	up, err := link.Dial("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done
	_ = conn.Close()
	_ = up.Close()
	<-done
}

// track registers conn (closed by close) and returns the link's proxy,
// made on first use, blackholed if src or dst is cut off; false after
// close.
func (n *peerNet) track(conn net.Conn, src, dst int) (*serverkit.FaultProxy, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, false
	}
	n.conns[conn] = struct{}{}
	key := [2]int{src, dst}
	p := n.links[key]
	if p == nil {
		p = serverkit.NewFaultProxy()
		n.links[key] = p
		if n.isolated >= 0 && (src == n.isolated || dst == n.isolated) {
			p.Blackhole()
		}
	}
	return p, true
}

func (n *peerNet) untrack(conn net.Conn) {
	_ = conn.Close()
	n.mu.Lock()
	delete(n.conns, conn)
	n.mu.Unlock()
}

// isolate blackholes every link to or from member i (-1: none) and resumes
// the others, closing the connections that were blackholed.
func (n *peerNet) isolate(i int) error {
	n.mu.Lock()
	n.isolated = i
	var cut, resume []*serverkit.FaultProxy
	for k, p := range n.links {
		if i >= 0 && (k[0] == i || k[1] == i) {
			cut = append(cut, p)
		} else {
			resume = append(resume, p)
		}
	}
	n.mu.Unlock()
	for _, p := range cut {
		p.Blackhole()
	}
	for _, p := range resume {
		p.Resume()
	}
	return nil
}

// close stops the listeners, closes every connection and link, and returns
// once every goroutine of n has ended.
func (n *peerNet) close() {
	n.mu.Lock()
	n.closed = true
	lns := n.lns
	var conns []net.Conn
	for c := range n.conns {
		conns = append(conns, c)
	}
	links := n.links
	n.mu.Unlock()
	for _, l := range lns {
		_ = l.Close()
	}
	for _, c := range conns {
		_ = c.Close()
	}
	for _, p := range links {
		p.Close()
	}
	n.wg.Wait()
}
