package zkwire

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"testing"
	"time"
)

func TestRequestAndCreatePath(t *testing.T) {
	p := binary.BigEndian.AppendUint32(nil, 0)
	p = binary.BigEndian.AppendUint32(p, 7)
	p = binary.BigEndian.AppendUint32(p, uint32(OpCreate))
	p = binary.BigEndian.AppendUint32(p, 4)
	p = append(p, "/a/b"...)
	xid, op, ok := Request(p)
	if !ok || xid != 7 || op != OpCreate {
		t.Fatalf("Request: %d %d %v", xid, op, ok)
	}
	if path, ok := CreatePath(p); !ok || string(path) != "/a/b" {
		t.Fatalf("CreatePath: %q %v", path, ok)
	}
	if _, ok := CreatePath(p[:18]); ok {
		t.Fatal("CreatePath accepted a cut path")
	}
	binary.BigEndian.PutUint32(p[8:12], uint32(OpDelete))
	if _, ok := CreatePath(p); ok {
		t.Fatal("CreatePath accepted a delete")
	}
	if _, _, ok := Request(p[:11]); ok {
		t.Fatal("Request accepted 11 bytes")
	}
}

func TestConnectRoundTrip(t *testing.T) {
	req := ConnectRequest(0x1234, []byte("pw"), 30*time.Second)
	if got := binary.BigEndian.Uint32(req[12:16]); got != 30000 {
		t.Fatalf("timeout %d ms", got)
	}
	// A response has the same layout after protocol version and timeout.
	resp := binary.BigEndian.AppendUint32(nil, 0)
	resp = binary.BigEndian.AppendUint32(resp, 4000)
	resp = binary.BigEndian.AppendUint64(resp, 0x1234)
	resp = binary.BigEndian.AppendUint32(resp, 2)
	resp = append(resp, "pw"...)
	r, ok := ParseConnectResponse(resp)
	if !ok || r.SessionID != 0x1234 || r.Timeout != 4*time.Second || string(r.Passwd) != "pw" {
		t.Fatalf("%+v %v", r, ok)
	}
	if _, ok := ParseConnectResponse(resp[:15]); ok {
		t.Fatal("short response accepted")
	}
}

func TestFrames(t *testing.T) {
	var b bytes.Buffer
	if err := WriteFrame(&b, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFrame(&b, 10)
	if err != nil || string(got) != "hello" {
		t.Fatalf("%q %v", got, err)
	}
	WriteFrame(&b, make([]byte, 11))
	if _, err := ReadFrame(&b, 10); err == nil {
		t.Fatal("frame over max accepted")
	}
}

func TestParseCreate2Reply(t *testing.T) {
	body := binary.BigEndian.AppendUint32(nil, 5)   // xid
	body = binary.BigEndian.AppendUint64(body, 99)  // zxid
	body = binary.BigEndian.AppendUint32(body, 0)   // err
	body = binary.BigEndian.AppendUint32(body, 3)   // path
	body = append(body, "/n1"...)                   //
	stat := binary.BigEndian.AppendUint64(nil, 42)  // czxid
	stat = append(stat, make([]byte, StatLen-8)...) //
	binary.BigEndian.PutUint64(stat[44:52], 0xabc)  // ephemeral owner
	path, st, ok := ParseCreate2Reply(append(body, stat...))
	if !ok || path != "/n1" || st.Czxid != 42 || st.EphemeralOwner != 0xabc {
		t.Fatalf("%q %+v %v", path, st, ok)
	}
	if _, _, ok := ParseCreate2Reply(append(body, stat[:StatLen-1]...)); ok {
		t.Fatal("short Stat accepted")
	}
	binary.BigEndian.PutUint32(body[12:16], 0xffffff92) // NodeExists
	if _, _, ok := ParseCreate2Reply(append(body, stat...)); ok {
		t.Fatal("error reply accepted")
	}
}

// TestScanSplitFrames feeds Conn's parser replies cut at every byte.
func TestScanSplitFrames(t *testing.T) {
	obs := &countObs{}
	c := NewConn(nil, obs, &Creates{}, &Watches{})
	c.wroteHello = true
	c.helloSentAt = 1
	c.sent[3] = []int64{10}
	c.sent[4] = []int64{20}
	hello := binary.BigEndian.AppendUint32(nil, 20)
	hello = binary.BigEndian.AppendUint32(hello, 0)
	hello = binary.BigEndian.AppendUint32(hello, 4000)
	hello = binary.BigEndian.AppendUint64(hello, 0x77)
	hello = append(hello, make([]byte, 4)...)
	var stream []byte
	stream = append(stream, hello...)
	for _, xid := range []int32{3, XidWatchEvent, 4} {
		r := binary.BigEndian.AppendUint32(nil, 16+5)
		r = binary.BigEndian.AppendUint32(r, uint32(xid))
		r = append(r, make([]byte, 12+5)...)
		stream = append(stream, r...)
	}
	for _, b := range stream {
		c.scan([]byte{b})
	}
	if obs.id != 0x77 || obs.timeout != 4*time.Second || len(obs.replied) != 3 ||
		obs.replied[0] != 1 || obs.replied[1] != 10 || obs.replied[2] != 20 {
		t.Fatalf("%+v", obs)
	}
}

type countObs struct {
	id      int64
	timeout time.Duration
	replied []int64
}

func (o *countObs) Handshake(id int64, timeout time.Duration, sentAt int64) time.Duration {
	o.id, o.timeout = id, timeout
	o.replied = append(o.replied, sentAt)
	return 0
}
func (o *countObs) Replied(sentAt int64)        { o.replied = append(o.replied, sentAt) }
func (o *countObs) FailedBeforeHandshake(error) {}

// watchReq encodes a getData, exists or getChildren2 request for path.
func watchReq(xid, op int32, path string, watch bool) []byte {
	p := binary.BigEndian.AppendUint32(nil, 0)
	p = binary.BigEndian.AppendUint32(p, uint32(xid))
	p = binary.BigEndian.AppendUint32(p, uint32(op))
	p = binary.BigEndian.AppendUint32(p, uint32(len(path)))
	p = append(p, path...)
	if watch {
		p = append(p, 1)
	} else {
		p = append(p, 0)
	}
	binary.BigEndian.PutUint32(p, uint32(len(p)-4))
	return p
}

// replyFrame encodes a reply frame to xid with zxid, error code and a body
// of n bytes.
func replyFrame(xid int32, zxid int64, errCode int32, n int) []byte {
	r := binary.BigEndian.AppendUint32(nil, uint32(16+n))
	r = binary.BigEndian.AppendUint32(r, uint32(xid))
	r = binary.BigEndian.AppendUint64(r, uint64(zxid))
	r = binary.BigEndian.AppendUint32(r, uint32(errCode))
	return append(r, make([]byte, n)...)
}

// eventFrame encodes a watch event of type typ on path.
func eventFrame(typ int32, path string) []byte {
	r := binary.BigEndian.AppendUint32(nil, uint32(16+8+4+len(path)))
	r = binary.BigEndian.AppendUint32(r, 0xffffffff) // XidWatchEvent
	r = binary.BigEndian.AppendUint64(r, ^uint64(0)) // zxid -1
	r = binary.BigEndian.AppendUint32(r, 0)
	r = binary.BigEndian.AppendUint32(r, uint32(typ))
	r = binary.BigEndian.AppendUint32(r, 3) // SyncConnected
	r = binary.BigEndian.AppendUint32(r, uint32(len(path)))
	return append(r, path...)
}

func helloFrame(id int64) []byte {
	hello := binary.BigEndian.AppendUint32(nil, 20)
	hello = binary.BigEndian.AppendUint32(hello, 0)
	hello = binary.BigEndian.AppendUint32(hello, 4000)
	hello = binary.BigEndian.AppendUint64(hello, uint64(id))
	return append(hello, make([]byte, 4)...)
}

func TestWatchRequest(t *testing.T) {
	for _, tc := range []struct {
		p    []byte
		op   int32
		path string
		ok   bool
	}{
		{watchReq(3, OpGetData, "/a", true), OpGetData, "/a", true},
		{watchReq(3, OpExists, "/b/c", true), OpExists, "/b/c", true},
		{watchReq(3, OpGetChildren2, "/", true), OpGetChildren2, "/", true},
		{watchReq(3, OpGetData, "/a", false), 0, "", false},
		{watchReq(3, OpSetData, "/a", true), 0, "", false},
		{watchReq(3, OpGetData, "/a", true)[:17], 0, "", false},
	} {
		op, path, ok := WatchRequest(tc.p)
		if op != tc.op || path != tc.path || ok != tc.ok {
			t.Errorf("WatchRequest(%x) = %d %q %v, want %d %q %v", tc.p, op, path, ok, tc.op, tc.path, tc.ok)
		}
	}
}

// TestScanWatchMirror feeds Conn's parser, a byte at a time, replies to
// requests sent with the watch flag and watch events, and checks that the
// mirror follows go-zookeeper's rules (Watches).
func TestScanWatchMirror(t *testing.T) {
	w := &Watches{}
	c := NewConn(nil, &countObs{}, &Creates{}, w)
	c.wroteHello = true
	for xid, r := range map[int32]watchRequest{3: {OpGetData, "/a"}, 4: {OpExists, "/b"}, 5: {OpExists, "/c"},
		6: {OpGetChildren2, "/d"}, 7: {OpGetData, "/e"}, 8: {OpGetChildren2, "/f"}, 9: {OpGetChildren2, "/a"}} {
		c.watchReqs[xid] = r
	}
	feed := func(frames ...[]byte) {
		for _, f := range frames {
			for _, b := range f {
				c.scan([]byte{b})
			}
		}
	}
	feed(helloFrame(0x77),
		replyFrame(3, 10, 0, 80),   // data /a
		replyFrame(4, 11, -101, 0), // exist /b (NoNode)
		replyFrame(5, 12, 0, 68),   // data /c
		replyFrame(6, 13, 0, 90),   // child /d
		replyFrame(7, 14, -101, 0), // getData of a missing node: none
		replyFrame(8, 15, -102, 0), // refused (NoAuth): none
		replyFrame(9, 16, 0, 4+68), // child /a
		replyFrame(10, 17, 0, 68),  // not a watch request
		eventFrame(3, "/a"),        // data changed: data /a goes
		eventFrame(1, "/b"),        // created: exist /b goes
		eventFrame(4, "/c"),        // children changed: no child watch on /c
		replyFrame(-2, 0, 0, 0))    // ping
	if got, want := w.Keys(), []string{"child /a", "child /d", "data /c"}; !slices.Equal(got, want) {
		t.Fatalf("mirror %v, want %v", got, want)
	}
	feed(eventFrame(2, "/c"), eventFrame(2, "/a"), eventFrame(4, "/d"))
	if got := w.Keys(); len(got) != 0 {
		t.Fatalf("mirror %v after every watch fired", got)
	}
	if len(c.watchReqs) != 0 {
		t.Fatalf("requests left awaiting replies: %v", c.watchReqs)
	}
}

// TestReadGate: after a handshake with watches mirrored, a reply that
// would make go-zookeeper write lastZxid is held until set-watches is
// written; watch events, ping replies and replies without a zxid pass.
// Without watches nothing is held; a refused session clears the mirror.
func TestReadGate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		watches bool
		id      int64
		held    bool
	}{
		{"watches", true, 0x77, true},
		{"none", false, 0x77, false},
		{"expired", true, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &Watches{}
			if tc.watches {
				w.add(watchKey{"/a", watchData})
			}
			client, server := net.Pipe()
			defer server.Close()
			c := NewConn(client, &holdObs{hold: 10 * time.Second}, &Creates{}, w)
			defer c.Close()
			go io.Copy(io.Discard, server)
			go func() {
				for _, f := range [][]byte{helloFrame(tc.id), eventFrame(3, "/x"), replyFrame(-2, 0, 0, 0),
					replyFrame(1, 0, 0, 0), replyFrame(2, 42, 0, 3)} {
					if _, err := server.Write(f); err != nil {
						return
					}
				}
			}()
			if _, err := c.Write([]byte{0, 0, 0, 0}); err != nil { // the handshake
				t.Fatal(err)
			}
			readFrame := func() []byte {
				t.Helper()
				b, err := ReadFrame(c, 1<<10)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			readFrame() // connect response
			if tc.id == 0 && w.Len() != 0 {
				t.Fatal("mirror kept after the session was refused")
			}
			for range 3 { // event, ping, reply without zxid
				readFrame()
			}
			got := make(chan []byte, 1)
			go func() { b, _ := ReadFrame(c, 1<<10); got <- b }()
			select {
			case <-got:
				if tc.held {
					t.Fatal("a reply with a zxid was read before set-watches was written")
				}
				return
			case <-time.After(200 * time.Millisecond):
				if !tc.held {
					t.Fatal("a reply was held with no set-watches due")
				}
			}
			sw := binary.BigEndian.AppendUint32(nil, 8)
			sw = binary.BigEndian.AppendUint32(sw, 5)
			sw = binary.BigEndian.AppendUint32(sw, uint32(OpSetWatches))
			if _, err := c.Write(sw); err != nil {
				t.Fatal(err)
			}
			select {
			case b := <-got:
				if h, ok := ParseReplyHeader(b); !ok || h.Xid != 2 || h.Zxid != 42 {
					t.Fatalf("read %x after set-watches", b)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the reply still held after set-watches was written")
			}
		})
	}
}

type holdObs struct {
	countObs
	hold time.Duration
}

func (o *holdObs) Handshake(int64, time.Duration, int64) time.Duration { return o.hold }
