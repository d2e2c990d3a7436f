package zkwire

import (
	"bytes"
	"encoding/binary"
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
	c := NewConn(nil, obs, &Creates{})
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
