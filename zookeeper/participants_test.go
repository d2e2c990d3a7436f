package zookeeper

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"go.uber.org/goleak"
)

// fillQueue creates dir (under cl's chroot) holding n lock- nodes of the
// queue's grammar, made by a connection of their own in multis of 500,
// and returns their names in queue order. The nodes are ephemeral: they go
// with that connection, at the test's cleanup.
func fillQueue(tb testing.TB, cl *zktest.Cluster, dir string, n int) []string {
	tb.Helper()
	conn, _, err := zk.Connect(cl.Addrs(), 30*time.Second, zk.WithLogInfo(false))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(conn.Close)
	adir := cl.Chroot() + dir
	if _, err := conn.Create(adir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		tb.Fatal(err)
	}
	names := make([]string, 0, n)
	for len(names) < n {
		ops := make([]any, min(500, n-len(names)))
		for i := range ops {
			ops[i] = &zk.CreateRequest{Path: adir + "/" + nodePrefix(newGUID(), "lock-", false, 0),
				Data: []byte("contender"), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeral | zk.FlagSequence}
		}
		res, err := conn.Multi(ops...)
		if err != nil {
			tb.Fatalf("creating %d nodes: %v", len(ops), err)
		}
		for _, r := range res {
			names = append(names, r.String[len(adir)+1:])
		}
	}
	return names
}

// queueOn returns a lock queue on dir of a Session connected to cl
// through dial (if not nil).
func queueOn(tb testing.TB, cl *zktest.Cluster, dir string, dial zk.Dialer) *Queue {
	tb.Helper()
	var opts []Option
	if dial != nil {
		opts = append(opts, WithDialer(dial))
	}
	s := connect(tb, cl.Servers(), opts...)
	q, err := NewQueue(s, dir, []string{"lock-"}, FirstHolds, GrantsLowest())
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// getDataLog wraps every connection a Session dials: it counts the getData
// requests written, calls onGetData (if set) before writing each, and
// records the most getData requests ever in flight at once (written, not
// yet answered), from the xids of requests and replies.
type getDataLog struct {
	onGetData func(n int) // n: getData requests written before this one

	mu          sync.Mutex
	written     int
	inFlight    map[int32]bool
	maxInFlight int
}

func (l *getDataLog) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &getDataConn{Conn: c, log: l}, nil
}

func (l *getDataLog) counts() (written, maxInFlight int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.written, l.maxInFlight
}

type getDataConn struct {
	net.Conn
	log     *getDataLog
	pending []byte // reply bytes not yet framed
	hello   bool   // the handshake reply was read
}

func (c *getDataConn) Write(p []byte) (int, error) {
	l := c.log
	if xid, op, ok := zkwire.Request(p); ok && op == zkwire.OpGetData { // one request per Write
		l.mu.Lock()
		n := l.written
		l.written++
		if l.inFlight == nil {
			l.inFlight = map[int32]bool{}
		}
		l.inFlight[xid] = true
		l.maxInFlight = max(l.maxInFlight, len(l.inFlight))
		l.mu.Unlock()
		if l.onGetData != nil {
			l.onGetData(n)
		}
	}
	return c.Conn.Write(p)
}

func (c *getDataConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.pending = append(c.pending, p[:n]...)
	for len(c.pending) >= 4 {
		size := int(binary.BigEndian.Uint32(c.pending))
		if len(c.pending) < 4+size {
			break
		}
		if h, ok := zkwire.ParseReplyHeader(c.pending[4 : 4+size]); ok && c.hello {
			c.log.mu.Lock()
			delete(c.log.inFlight, h.Xid)
			c.log.mu.Unlock()
		}
		c.hello = true
		c.pending = c.pending[4+size:]
	}
	return n, err
}

func participantNames(ps []Participant) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return names
}

// TestParticipantsReadsInParallel: Participants of a directory of 1,000
// nodes lists them all, in queue order, with their data and tokens (one
// multi's nodes share a czxid: tokens do not decrease), its getData
// requests pipelined on the Session (more than one in flight; the old
// one-after-the-other read had one) but never more than maxNodeReads.
func TestParticipantsReadsInParallel(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	want := fillQueue(t, cl, "/big", 1000)
	log := &getDataLog{}
	q := queueOn(t, cl, "/big", log.dial)
	ps, err := q.Participants(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := participantNames(ps); !slices.Equal(got, want) {
		t.Fatalf("got %d participants, want the %d nodes in creation order", len(got), len(want))
	}
	for i, p := range ps {
		if string(p.Data) != "contender" || p.Token <= 0 || (i > 0 && p.Token < ps[i-1].Token) || p.Kind != "lock-" {
			t.Fatalf("participant %d: %+v", i, p)
		}
	}
	written, most := log.counts()
	if written != len(want) {
		t.Fatalf("%d getData requests for %d nodes", written, len(want))
	}
	if most < 2 || most > maxNodeReads {
		t.Fatalf("at most %d getData requests in flight at once, want 2 to %d", most, maxNodeReads)
	}
}

// TestParticipantsSkipsNodesDeletedDuringRead: nodes deleted between the
// listing and their read (here: as the first read is written, so that every
// read of theirs reaches the server after the delete) are left out, not an
// error; the others come in queue order.
func TestParticipantsSkipsNodesDeletedDuringRead(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	names := fillQueue(t, cl, "/big", 600)
	in := zktest.Inspect(t, cl)
	var want, gone []string
	for i, n := range names {
		if i%3 == 1 {
			gone = append(gone, n)
		} else {
			want = append(want, n)
		}
	}
	log := &getDataLog{onGetData: func(n int) {
		if n > 0 {
			return
		}
		ops := make([]any, len(gone))
		for i, g := range gone {
			ops[i] = &zk.DeleteRequest{Path: cl.Chroot() + "/big/" + g, Version: -1}
		}
		if _, err := in.Conn().Multi(ops...); err != nil {
			t.Errorf("deleting %d nodes: %v", len(ops), err)
		}
	}}
	q := queueOn(t, cl, "/big", log.dial)
	ps, err := q.Participants(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := participantNames(ps); !slices.Equal(got, want) {
		t.Fatalf("got %d participants, want the %d left of %d", len(got), len(want), len(names))
	}
}

// TestParticipantsCancelledMidRead: a ctx cancelled while Participants is
// reading 2,000 nodes ends the call with ctx's cause; no further read is
// issued beyond those already started (at most maxNodeReads in flight, and
// as many racing with the cancel), and no goroutine of the call is left
// (the requests still in flight finish on the Session's workers).
func TestParticipantsCancelledMidRead(t *testing.T) {
	// Not parallel: it looks for leaked goroutines in the whole process.
	cl := zktest.Shared(t)
	const nodes, cancelAt = 2000, 300
	fillQueue(t, cl, "/big", nodes)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := &getDataLog{onGetData: func(n int) {
		if n == cancelAt {
			cancel()
		}
	}}
	q := queueOn(t, cl, "/big", log.dial)
	leaks := goleak.IgnoreCurrent()
	ps, err := q.Participants(ctx)
	if !errors.Is(err, context.Canceled) || ps != nil {
		t.Fatalf("got %d participants, %v; want context.Canceled", len(ps), err)
	}
	if err := goleak.Find(leaks, goleak.IgnoreAnyFunction("github.com/zkrecipes/zkrecipes/zookeeper.(*workers).work"),
		// a reconnect under load starts the Session's own connection loops
		goleak.IgnoreAnyFunction("github.com/go-zookeeper/zk.(*Conn).recvLoop"),
		goleak.IgnoreAnyFunction("github.com/go-zookeeper/zk.(*Conn).sendLoop")); err != nil {
		t.Fatalf("goroutines left by Participants: %v", err)
	}
	// Requests queued before the cancel may still be written: wait until
	// the Session is idle, then count.
	serverkit.Eventually(t, 10*time.Second, "no getData in flight", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		return len(log.inFlight) == 0
	})
	if written, _ := log.counts(); written > cancelAt+1+2*maxNodeReads {
		t.Fatalf("%d getData requests written; the cancel came at the %dth", written, cancelAt+1)
	}
}

// BenchmarkParticipants lists directories of 1,000, 10,000 and 50,000
// nodes (docs/performance.md#participants-of-a-big-directory).
func BenchmarkParticipants(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			cl := zktest.Shared(b)
			fillQueue(b, cl, "/big", n)
			q := queueOn(b, cl, "/big", nil)
			ctx := context.Background()
			for b.Loop() {
				ps, err := q.Participants(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if len(ps) != n {
					b.Fatalf("%d participants, want %d", len(ps), n)
				}
			}
		})
	}
}

// TestReadEach: every index is read once, never more than limit at a
// time; a failed read stops the others from starting and is the error; a
// done ctx starts none and gives its cause.
func TestReadEach(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	running, most := 0, 0
	err := readEach(context.Background(), 1000, 7, func(i int) error {
		mu.Lock()
		seen[i]++
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(10 * time.Microsecond)
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	})
	if err != nil || len(seen) != 1000 || most > 7 {
		t.Fatalf("err %v, %d indices, %d at once", err, len(seen), most)
	}
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("index %d read %d times", i, n)
		}
	}
	boom := errors.New("boom")
	var calls sync.Map
	err = readEach(context.Background(), 1000, 1, func(i int) error {
		calls.Store(i, true)
		if i == 10 {
			return boom
		}
		return nil
	})
	if _, after := calls.Load(11); !errors.Is(err, boom) || after {
		t.Fatalf("err %v, read after the failure %t", err, after)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(boom)
	err = readEach(ctx, 10, 4, func(int) error {
		t.Error("read on a done ctx")
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want ctx's cause", err)
	}
}
