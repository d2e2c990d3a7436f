package zookeeper

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// The hand-off costs one round trip: docs/design.md#one-round-trip-per-hand-off.

// TestFiredChildWatchStillGrants: a waiter's re-list set a child watch and
// granted it, but a change of the directory fired the watch before the
// engine claimed it. The grant stands without a read in front of it (the
// watch fired for a change after the listing: whether the callback ran
// before or after the claim is scheduling), and the lease reads its node
// right after. A contender joining: the lease lives, and a later deletion
// of its node ends it. The change was the deletion of the node itself (by
// someone else, after the listing): the grant is refused, or its lease
// ends with recipe.ErrNodeDeleted within one read.
func TestFiredChildWatchStillGrants(t *testing.T) {
	t.Parallel()
	t.Run("a join", func(t *testing.T) { testFiredChildWatch(t, false) })
	t.Run("the own node deleted", func(t *testing.T) { testFiredChildWatch(t, true) })
}

func testFiredChildWatch(t *testing.T, ownDeleted bool) {
	cl := zktest.Shared(t)
	var log opLog
	s := connect(t, cl.Servers(), WithDialer(log.dialer()))
	in := zktest.Inspect(t, cl)
	q := newTestQueue(t, s, "/firedslot")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fs := q.fastStartFor(true, nil)
	tk, err := q.join(ctx, "lock-", nil, nil, false, fs)
	if err != nil {
		t.Fatal(err)
	}
	fw := q.startFast(ctx, fs, true)
	defer fw.drop()
	if fw.pre == nil {
		t.Fatal("no early lease from the create2 reply")
	}
	w := &waiter{q: q, d: &q.d, t: tk, ep: tk.ep, block: true, fw: fw}
	if _, _, piped, err := w.list(ctx); err != nil || !piped {
		t.Fatalf("first listing: piped %v, %v", piped, err)
	}
	if _, _, piped, err := w.list(ctx); err != nil || piped || !fw.watched {
		t.Fatalf("re-list: piped %v, child watch %v, %v", piped, fw.watched, err)
	}
	slot := fw.slot
	if ownDeleted {
		in.Delete(tk.path[len(s.chroot):])
	} else {
		in.Create("/firedslot/joined", nil) // any change of the children fires the watch
		defer in.Delete("/firedslot/joined")
	}
	serverkit.Eventually(t, 10*time.Second, "child watch fired", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return slot.fired
	})
	ep, err := s.conns.current()
	if err != nil {
		t.Fatal(err)
	}
	log.take()
	l, ok, err := fw.grantOnChildWatch(ep)
	if ownDeleted {
		switch {
		case !ok:
			t.Fatal("the fired child watch was not used")
		case err != nil:
			if !errors.Is(err, recipe.ErrNodeDeleted) {
				t.Fatalf("grant on a deleted node: %v, want ErrNodeDeleted", err)
			}
		default:
			awaitNodeDeleted(t, l)
		}
		return
	}
	if !ok || err != nil || l == nil {
		t.Fatalf("grant on the fired child watch: ok %v, lease %v, %v", ok, l != nil, err)
	}
	defer l.Release(ctx)
	serverkit.Eventually(t, 10*time.Second, "own node read after the grant", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		return count(log.ops, zktest.OpGetData) == 1
	})
	in.Delete(l.Path())
	awaitNodeDeleted(t, l)
}

// TestAwaitWakeupOneRoundTrip: a Ticket (no early lease) woken by its
// predecessor's deletion sends its listing and the read of its own node
// together: both are written before either is answered (the link adds
// 20 ms each way, so "together" is not a race with the replies), and
// nothing else is sent before Await returns.
func TestAwaitWakeupOneRoundTrip(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	proxy := serverkit.NewFaultProxy()
	defer proxy.Close()
	proxy.SetLatency(20 * time.Millisecond)
	var tap frameTap
	hs := connect(t, cl.Servers())
	ws := connect(t, cl.Servers(), WithDialer(func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := proxy.Dial(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		return &tapConn{Conn: c, tap: &tap}, nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	held, err := newTestQueue(t, hs, "/awaitrt").Acquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := newTestQueue(t, ws, "/awaitrt").Join(ctx, "lock-", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Leave(ctx)
	got := make(chan acqResult, 1)
	go func() {
		l, err := tk.Await(ctx)
		got <- acqResult{l, err}
	}()
	// Waiting: first listing (with its read), then the predecessor's watch.
	serverkit.Eventually(t, 10*time.Second, "waiter watching its predecessor", func() bool {
		return tap.count("w", zktest.OpGetData) == 2
	})
	// The watch's reply: every request written so far answered (a fixed
	// sleep was short on a loaded machine, and the reply then led the
	// wakeup's frames).
	serverkit.Eventually(t, 10*time.Second, "the waiter's requests answered", tap.answered)
	tap.take()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.l.Release(ctx)
	frames := tap.take()
	// event; then two requests; then their two replies.
	var kinds []string
	var ops []int32
	for _, f := range frames {
		kinds = append(kinds, f.kind)
		if f.kind == "w" {
			ops = append(ops, f.op)
		}
	}
	if !slices.Equal(kinds, []string{"e", "w", "w", "r", "r"}) {
		t.Fatalf("wakeup frames %v (requests %v); want the event, the listing and the own-node read written together, then their replies", kinds, ops)
	}
	slices.Sort(ops)
	if !slices.Equal(ops, []int32{zktest.OpGetData, zktest.OpGetChildren2}) {
		t.Fatalf("wakeup wrote %v; want one getChildren2 and one getData", ops)
	}
}

// frameTap records, in order, the requests a connection writes ("w", by
// opcode), and the replies ("r") and watch events ("e") it reads; pings
// are left out.
type frameTap struct {
	mu     sync.Mutex
	frames []tapFrame
}

type tapFrame struct {
	kind string
	op   int32
}

func (f *frameTap) add(kind string, op int32) {
	f.mu.Lock()
	f.frames = append(f.frames, tapFrame{kind, op})
	f.mu.Unlock()
}

func (f *frameTap) take() []tapFrame {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.frames
	f.frames = nil
	return out
}

func (f *frameTap) count(kind string, op int32) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, fr := range f.frames {
		if fr.kind == kind && fr.op == op {
			n++
		}
	}
	return n
}

// answered reports whether every request recorded has its reply.
func (f *frameTap) answered() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, fr := range f.frames {
		switch fr.kind {
		case "w":
			n++
		case "r":
			n--
		}
	}
	return n == 0
}

// tapConn feeds a frameTap. go-zookeeper writes one whole frame per Write;
// reads are reassembled into frames: [len][xid][zxid][err]...
type tapConn struct {
	net.Conn
	tap   *frameTap
	hello [2]bool // the connect request and response (no xid) went by
	rbuf  []byte
}

const xidPing = -2

func (c *tapConn) Write(p []byte) (int, error) {
	if c.hello[0] && len(p) >= 12 {
		if xid := int32(binary.BigEndian.Uint32(p[4:8])); xid != xidPing {
			c.tap.add("w", int32(binary.BigEndian.Uint32(p[8:12])))
		}
	}
	c.hello[0] = true
	return c.Conn.Write(p)
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.rbuf = append(c.rbuf, p[:n]...)
	for len(c.rbuf) >= 4 {
		size := int(binary.BigEndian.Uint32(c.rbuf[:4]))
		if len(c.rbuf) < 4+size {
			break
		}
		if c.hello[1] && size >= 4 {
			switch xid := int32(binary.BigEndian.Uint32(c.rbuf[4:8])); {
			case xid == -1:
				c.tap.add("e", 0)
			case xid != xidPing:
				c.tap.add("r", 0)
			}
		}
		c.hello[1] = true
		c.rbuf = c.rbuf[4+size:]
	}
	return n, err
}
