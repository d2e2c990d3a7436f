package zkwire

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"
)

func TestRequest(t *testing.T) {
	p := binary.BigEndian.AppendUint32(nil, 0)
	p = binary.BigEndian.AppendUint32(p, 7)
	p = binary.BigEndian.AppendUint32(p, uint32(OpCreate))
	p = binary.BigEndian.AppendUint32(p, 4)
	p = append(p, "/a/b"...)
	xid, op, ok := Request(p)
	if !ok || xid != 7 || op != OpCreate {
		t.Fatalf("Request: %d %d %v", xid, op, ok)
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

func TestParseCreate2(t *testing.T) {
	body := binary.BigEndian.AppendUint32(nil, 3)   // path
	body = append(body, "/n1"...)                   //
	stat := binary.BigEndian.AppendUint64(nil, 42)  // czxid
	stat = append(stat, make([]byte, StatLen-8)...) //
	binary.BigEndian.PutUint64(stat[44:52], 0xabc)  // ephemeral owner
	path, st, ok := ParseCreate2(append(body, stat...))
	if !ok || path != "/n1" || st.Czxid != 42 || st.EphemeralOwner != 0xabc {
		t.Fatalf("%q %+v %v", path, st, ok)
	}
	if _, _, ok := ParseCreate2(append(body, stat[:StatLen-1]...)); ok {
		t.Fatal("short Stat accepted")
	}
}

// TestScanSplitFrames feeds Conn's parser replies cut at every byte.
func TestScanSplitFrames(t *testing.T) {
	obs := &countObs{}
	c := NewConn(nil, obs, &Zxid{})
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

func (o *countObs) Handshake(id int64, timeout time.Duration, sentAt int64) {
	o.id, o.timeout = id, timeout
	o.replied = append(o.replied, sentAt)
}
func (o *countObs) Replied(sentAt int64)        { o.replied = append(o.replied, sentAt) }
func (o *countObs) FailedBeforeHandshake(error) {}

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

// TestScanZeroesReplyZxid feeds Conn's parser, cut at every byte, a
// handshake and replies, events and pings: every reply (xid 0 or more) is
// handed on with zxid 0 and its zxid recorded once it is read whole (0
// leaves the record alone); events and pings pass untouched; a refused
// session resets the record.
func TestScanZeroesReplyZxid(t *testing.T) {
	z := &Zxid{}
	c := NewConn(nil, &countObs{}, z)
	c.wroteHello = true
	body := binary.BigEndian.AppendUint32(nil, 3)
	body = append(body, "/n1"...)
	stat := binary.BigEndian.AppendUint64(nil, 77) // czxid
	body = append(body, append(stat, make([]byte, StatLen-8)...)...)
	create2 := replyFrame(6, 77, 0, len(body))
	copy(create2[20:], body)
	frames := [][]byte{helloFrame(0x77), replyFrame(3, 10, 0, 5), eventFrame(3, "/x"), replyFrame(-2, -1, 0, 0),
		replyFrame(4, 0, 0, 0), create2, replyFrame(5, 42, -101, 0)}
	var want []byte
	for i, f := range frames {
		g := append([]byte(nil), f...)
		if i != 0 && i != 2 && i != 3 {
			clear(g[8:16])
		}
		want = append(want, g...)
	}
	var got []byte
	for i, f := range frames {
		for j := range f {
			b := []byte{f[j]}
			c.scan(b)
			got = append(got, b...)
			if i == 1 && j < len(f)-1 && z.Last() != 0 {
				t.Fatalf("zxid recorded at byte %d of a %d-byte reply", j, len(f))
			}
		}
		if i == 1 && z.Last() != 10 {
			t.Fatalf("zxid %d after the first reply, want 10", z.Last())
		}
		if i == 4 && z.Last() != 10 {
			t.Fatalf("zxid %d after a reply with zxid 0, want 10 kept", z.Last())
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("handed on\n%x\nwant\n%x", got, want)
	}
	if z.Last() != 42 {
		t.Fatalf("zxid %d, want 42", z.Last())
	}
	c = NewConn(nil, &countObs{}, z)
	c.scan(helloFrame(0))
	if z.Last() != 0 {
		t.Fatalf("zxid %d after a refused session, want 0", z.Last())
	}
}

// TestWritePatchesZxid: the connect request carries the recorded zxid, a
// set-watches the one recorded at this connection's handshake, whatever
// came after; the caller's buffers are left as they were.
func TestWritePatchesZxid(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	z := &Zxid{}
	z.last.Store(0x1234)
	c := NewConn(client, &countObs{}, z)
	defer c.Close()
	hello := append(binary.BigEndian.AppendUint32(nil, 44), make([]byte, 44)...)
	sw := binary.BigEndian.AppendUint32(nil, 8+8+12)
	sw = binary.BigEndian.AppendUint32(sw, 5)
	sw = binary.BigEndian.AppendUint32(sw, uint32(OpSetWatches))
	sw = append(sw, make([]byte, 8+12)...)
	frames := make(chan []byte, 2)
	go func() {
		for range 2 {
			b, err := ReadFrame(server, 1<<10)
			if err != nil {
				return
			}
			frames <- b
		}
	}()
	for i, p := range [][]byte{hello, sw} {
		orig := append([]byte(nil), p...)
		if i == 1 { // set-watches: after the handshake and a reply
			c.scan(helloFrame(0x77))
			c.scan(replyFrame(1, 0x9999, 0, 0))
		}
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p, orig) {
			t.Fatal("Write modified the caller's buffer")
		}
	}
	if b := <-frames; binary.BigEndian.Uint64(b[4:12]) != 0x1234 {
		t.Fatalf("connect request %x: lastZxidSeen not 0x1234", b)
	}
	if b := <-frames; binary.BigEndian.Uint64(b[8:16]) != 0x1234 || z.Last() != 0x9999 {
		t.Fatalf("set-watches %x, recorded 0x%x: want relativeZxid 0x1234, the value at the handshake", b, z.Last())
	}
}

// TestParseChildren2 decodes a getChildren2 body, and refuses every
// truncation of it and lengths that point past it.
func TestParseChildren2(t *testing.T) {
	names := []string{"a", "", "_c_0123-lock-0000000007", "ü"}
	body := binary.BigEndian.AppendUint32(nil, uint32(len(names)))
	for _, n := range names {
		body = binary.BigEndian.AppendUint32(body, uint32(len(n)))
		body = append(body, n...)
	}
	stat := make([]byte, StatLen)
	binary.BigEndian.PutUint64(stat[0:], 42) // czxid
	body = append(body, stat...)
	got, st, ok := ParseChildren2(body)
	if !ok || st.Czxid != 42 || len(got) != len(names) {
		t.Fatalf("ParseChildren2 = %q, czxid %d, %v", got, st.Czxid, ok)
	}
	for i := range names {
		if got[i] != names[i] {
			t.Fatalf("child %d = %q, want %q", i, got[i], names[i])
		}
	}
	for n := range len(body) {
		if _, _, ok := ParseChildren2(body[:n]); ok {
			t.Fatalf("accepted %d of %d bytes", n, len(body))
		}
	}
	bad := bytes.Clone(body)
	binary.BigEndian.PutUint32(bad[4:], 1<<31) // a negative length
	if _, _, ok := ParseChildren2(bad); ok {
		t.Fatal("accepted a negative name length")
	}
	binary.BigEndian.PutUint32(bad[0:], 1<<30) // more names than bytes
	if _, _, ok := ParseChildren2(bad); ok {
		t.Fatal("accepted a count past the body")
	}
}
