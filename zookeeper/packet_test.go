package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// noTransition fails the test if the session changed state: a request the
// server refuses by dropping the connection shows as SUSPENDED.
func noTransition(t *testing.T, ch <-chan StateChange) {
	t.Helper()
	select {
	case c := <-ch:
		t.Fatalf("the connection changed state: %+v", c)
	default:
	}
}

// TestOversizeRequestsAreNeverSent is the new user's trial of issue 14 on a
// real server with its default jute.maxbuffer: a path too long for any
// request fails where it is given, data too large for the packet with its
// path fails at the call, a request of exactly the limit is accepted by
// the server, one byte more is refused before it is sent, and a raw
// request through Conn over the limit fails alone. Through all of it the
// connection never drops, nothing is left for the cleaner, and another
// path works.
func TestOversizeRequestsAreNeverSent(t *testing.T) {
	t.Parallel()
	s := connect(t, zktest.Shared(t).Servers())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	states := s.Listen(ctx)

	huge := "/lib/huge/" + strings.Repeat("x", 1100000)
	_, err := NewQueue(s, huge, []string{"lock-"}, FirstHolds)
	if !errors.Is(err, recipe.ErrTooLarge) || !errors.Is(err, recipe.ErrInvalidPath) {
		t.Fatalf("NewQueue with a 1.1 MB path: %v, want recipe.ErrTooLarge and ErrInvalidPath", err)
	}
	if len(err.Error()) > 1000 {
		t.Fatalf("the error quotes the whole path: %d bytes", len(err.Error()))
	}

	big := "/lib/big/" + strings.Repeat("y", 600000)
	q, err := NewQueue(s, big, []string{"lock-"}, FirstHolds)
	if err != nil {
		t.Fatalf("NewQueue with a 600 KB path: %v", err)
	}
	start := time.Now()
	if _, err := q.TryAcquire(ctx, "lock-", make([]byte, 500000)); !errors.Is(err, recipe.ErrTooLarge) {
		t.Fatalf("TryAcquire with 500 KB of data on a 600 KB path: %v, want ErrTooLarge", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the refusal took %v", d)
	}

	// The largest create the check allows is exactly the server's limit.
	prefix := len(q.d.adir) + 1 + len(nodePrefix(newGUID(), "lock-", false, 0))
	fits := defaultMaxPacket - zkwire.CreateFrame(prefix, 0, s.cfg.acl)
	l, err := q.Acquire(ctx, "lock-", make([]byte, fits))
	if err != nil {
		t.Fatalf("Acquire with a create of exactly %d bytes: %v", defaultMaxPacket, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Acquire(ctx, "lock-", make([]byte, fits+1)); !errors.Is(err, recipe.ErrTooLarge) {
		t.Fatalf("Acquire with a create of %d bytes: %v, want ErrTooLarge", defaultMaxPacket+1, err)
	}

	// A request the recipes did not build: refused by the send buffer.
	if _, err := s.Conn().Create("/raw", make([]byte, 1100000), 0, s.cfg.acl); !errors.Is(err, zk.ErrShortBuffer) ||
		!errors.Is(opErr("create", "/raw", err), recipe.ErrTooLarge) {
		t.Fatalf("a raw 1.1 MB create: %v, want zk.ErrShortBuffer", err)
	}

	noTransition(t, states)
	if n := s.cleaner.pending(); n != 0 {
		t.Fatalf("%d deletes left for the cleaner", n)
	}
	other, err := NewQueue(s, "/lib/other", []string{"lock-"}, FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	l, err = other.TryAcquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatalf("another path after the refusals: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	noTransition(t, states)
}

// TestPacketSizesMatchTheEncoding: the sizes the recipes check requests
// with are go-zookeeper's (and so the server's): at the limit, one byte
// under and one byte over it, the check's answer for a create and for the
// anchored multi is what the send buffer (sized to the limit) does with the
// same request, and a request the check allows is accepted by the server.
func TestPacketSizesMatchTheEncoding(t *testing.T) {
	t.Parallel()
	s := connect(t, zktest.Shared(t).Servers(), WithMaxPacket(minMaxPacket))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	states := s.Listen(ctx)
	q, err := NewQueue(s, "/sizes", []string{"write-", "read-"}, FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.d.ensureDir(); err != nil {
		t.Fatal(err)
	}
	flags := int32(zk.FlagEphemeral | zk.FlagSequence)
	anchorPath, err := s.Conn().Create(q.d.adir+"/"+nodePrefix(newGUID(), "write-", false, 0), nil, flags, s.cfg.acl)
	if err != nil {
		t.Fatal(err)
	}
	anchor := &anchorSpec{path: anchorPath, seq: 0}

	for _, c := range []struct {
		name   string
		anchor *anchorSpec
		frame  func(dataLen int) int
		send   func(data []byte) error
	}{
		{"create", nil,
			func(n int) int {
				return zkwire.CreateFrame(len(q.d.adir)+1+len(nodePrefix(newGUID(), "read-", false, 0)), n, s.cfg.acl)
			},
			func(data []byte) error {
				_, err := s.Conn().Create(q.d.adir+"/"+nodePrefix(newGUID(), "read-", false, 0), data, flags, s.cfg.acl)
				return err
			}},
		{"check and create", anchor,
			func(n int) int {
				return zkwire.CheckCreateFrame(len(anchor.path), len(q.d.adir)+1+len(nodePrefix(newGUID(), "read-", true, 0)), n, s.cfg.acl)
			},
			func(data []byte) error {
				_, err := s.Conn().Multi(&zk.CheckVersionRequest{Path: anchor.path, Version: -1},
					&zk.CreateRequest{Path: q.d.adir + "/" + nodePrefix(newGUID(), "read-", true, 0), Data: data, Acl: s.cfg.acl, Flags: flags})
				return err
			}},
	} {
		at := minMaxPacket - c.frame(0) // data length of a request of exactly the limit
		for _, n := range []int{at - 1, at, at + 1} {
			data := make([]byte, n)
			checked := q.d.checkCreate("read-", data, c.anchor)
			sent := c.send(data)
			if (checked == nil) != (sent == nil) || (checked != nil) != errors.Is(sent, zk.ErrShortBuffer) {
				t.Errorf("%s of %d bytes: the check says %v, the send buffer %v", c.name, c.frame(n), checked, sent)
			}
			if (checked == nil) != (n <= at) || (checked != nil && !errors.Is(checked, recipe.ErrTooLarge)) {
				t.Errorf("%s of %d bytes, limit %d: the check says %v", c.name, c.frame(n), minMaxPacket, checked)
			}
		}
	}
	noTransition(t, states)
}

// TestQueuePathLimit: a directory whose nodes' paths, with the slack for
// the requests and replies that carry them, would be over the packet limit
// is refused by NewQueue; one just under is accepted. For a queue declared
// AllowsAnchors the anchored create (a multi carrying two paths) is
// counted: on the longest directory NewQueue accepts, that multi, with the
// longest names, still passes the send buffer.
func TestQueuePathLimit(t *testing.T) {
	t.Parallel()
	s := connect(t, zktest.Shared(t).Servers(), WithMaxPacket(minMaxPacket))
	kinds := []string{"lock-"}
	room := minMaxPacket - pathSlack - maxNameLen(kinds, false) - 1 - len(s.abs("/d"))
	for _, extra := range []int{0, 1} {
		dir := "/d" + strings.Repeat("z", room+extra)
		_, err := NewQueue(s, dir, kinds, FirstHolds)
		if (err == nil) != (extra == 0) || (err != nil && !errors.Is(err, recipe.ErrTooLarge)) {
			t.Errorf("a directory of %d bytes: %v", len(dir), err)
		}
	}

	kinds = []string{"write-", "read-"}
	longest := sort.Search(minMaxPacket, func(n int) bool {
		_, err := NewQueue(s, "/d"+strings.Repeat("z", n), kinds, FirstHolds, AllowsAnchors())
		return err != nil
	}) - 1
	q, err := NewQueue(s, "/d"+strings.Repeat("z", longest), kinds, FirstHolds, AllowsAnchors())
	if err != nil {
		t.Fatal(err)
	}
	anchor := q.d.adir + "/" + nodePrefix(newGUID(), "write-", false, 0) + "-2147483648"
	_, err = s.Conn().Multi(&zk.CheckVersionRequest{Path: anchor, Version: -1},
		&zk.CreateRequest{Path: q.d.adir + "/" + nodePrefix(newGUID(), "write-", true, -2147483648), Acl: s.cfg.acl,
			Flags: zk.FlagEphemeral | zk.FlagSequence})
	if errors.Is(err, zk.ErrShortBuffer) {
		t.Fatalf("the anchored create on the longest directory NewQueue accepts (%d bytes) is over the limit", longest+2)
	}
}

func TestMaxPacketOption(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{minMaxPacket - 1, maxMaxPacket + 1, -1} {
		if _, err := Connect(ctx, []string{"127.0.0.1:2181"}, WithMaxPacket(n)); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("WithMaxPacket(%d): %v, want ErrBadOption", n, err)
		}
	}
	if _, err := Connect(ctx, []string{"127.0.0.1:2181"}, WithAuth("digest", make([]byte, defaultMaxPacket))); !errors.Is(err, recipe.ErrTooLarge) {
		t.Errorf("WithAuth over the limit: %v, want ErrTooLarge", err)
	}
}

// TestCheckRequestMatchesTheEncoding: CheckRequest and CheckMulti, the
// checks of requests built outside the recipes (resource/fencezk), allow
// exactly the requests go-zookeeper's send buffer (sized to the limit)
// encodes: the largest data they allow is sent and accepted by the server,
// one byte more is refused by both. Data too large to be read back within
// the limit (a getData reply) is refused even when its request would fit.
func TestCheckRequestMatchesTheEncoding(t *testing.T) {
	t.Parallel()
	s := connect(t, zktest.Shared(t).Servers(), WithMaxPacket(minMaxPacket))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	states := s.Listen(ctx)
	dir := s.abs("/checks")
	if err := s.ensurePath(dir, s.cfg.acl); err != nil {
		t.Fatal(err)
	}
	node := dir + "/" + strings.Repeat("n", 100) // long enough that the request, not the reply, is the bound
	if _, err := s.Conn().Create(node, nil, 0, s.cfg.acl); err != nil {
		t.Fatal(err)
	}
	seq := dir + "/seq-"
	flags := int32(zk.FlagEphemeral | zk.FlagSequence)
	for _, c := range []struct {
		name  string
		check func(data []byte) error
		send  func(data []byte) error
	}{
		{"setData",
			func(d []byte) error {
				return zkside.SessionOf(s).CheckRequest(&zk.SetDataRequest{Path: node, Data: d, Version: -1})
			},
			func(d []byte) error { _, err := s.Conn().Set(node, d, -1); return err }},
		{"create",
			func(d []byte) error {
				return zkside.SessionOf(s).CheckRequest(&zk.CreateRequest{Path: seq, Data: d, Acl: s.cfg.acl, Flags: flags})
			},
			func(d []byte) error { _, err := s.Conn().Create(seq, d, flags, s.cfg.acl); return err }},
		{"multi", func(d []byte) error {
			return zkside.SessionOf(s).CheckMulti(&zk.CheckVersionRequest{Path: node, Version: -1}, &zk.SetDataRequest{Path: node, Data: d, Version: -1},
				&zk.CreateRequest{Path: seq, Acl: s.cfg.acl, Flags: flags}, &zk.DeleteRequest{Path: dir + "/none", Version: -1})
		}, func(d []byte) error {
			_, err := s.Conn().Multi(&zk.CheckVersionRequest{Path: node, Version: -1}, &zk.SetDataRequest{Path: node, Data: d, Version: -1},
				&zk.CreateRequest{Path: seq, Acl: s.cfg.acl, Flags: flags}, &zk.DeleteRequest{Path: dir + "/none", Version: -1})
			return err
		}},
	} {
		at := sort.Search(minMaxPacket, func(n int) bool { return c.check(make([]byte, n)) != nil }) - 1
		if err := c.send(make([]byte, at)); c.name == "multi" && !errors.Is(err, zk.ErrNoNode) || c.name != "multi" && err != nil {
			t.Errorf("%s with the most data the check allows (%d bytes): %v", c.name, at, err)
		}
		over := make([]byte, at+1)
		if checked, sent := c.check(over), c.send(over); !errors.Is(checked, recipe.ErrTooLarge) || !errors.Is(sent, zk.ErrShortBuffer) {
			t.Errorf("%s with %d bytes: the check says %v, the send buffer %v", c.name, at+1, checked, sent)
		}
	}

	short := dir + "/s"
	fits := minMaxPacket - zkwire.GetDataReply(0)
	if err := zkside.SessionOf(s).CheckRequest(&zk.SetDataRequest{Path: short, Data: make([]byte, fits)}); err != nil {
		t.Errorf("data whose getData reply is exactly the limit: %v", err)
	}
	err := zkside.SessionOf(s).CheckRequest(&zk.SetDataRequest{Path: short, Data: make([]byte, fits+1)})
	if !errors.Is(err, recipe.ErrTooLarge) || !strings.Contains(err.Error(), "to read back") {
		t.Errorf("data whose getData reply is over the limit: %v", err)
	}
	t.Log(err)
	if err := zkside.SessionOf(s).CheckRequest("not a request"); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("an unknown op: %v", err)
	}
	noTransition(t, states)
}

// TestOverTheServersLimitNotSentAgain (issue 14): a Session told a packet
// limit above the server's (WithMaxPacket(4 MiB), the server at the
// default jute.maxbuffer) sends a request the server refuses by dropping
// the connection. The rule (packet.go): a request over defaultMaxPacket
// whose connection was lost right after it was sent, twice in a row, is
// not sent again. So TryAcquire fails with recipe.ErrTooLarge (it retried until
// its ctx ended), the cleaner gives the delete of its node up with one
// ERROR line (it retried for ever, the connection dropping every second),
// every log line and error shows the path shortened, and the session
// settles: connected, nothing left for the cleaner, another path works.
func TestOverTheServersLimitNotSentAgain(t *testing.T) {
	t.Parallel()
	rec := &records{}
	s := connect(t, zktest.Shared(t).Servers(), WithMaxPacket(4<<20), WithLogger(slog.New(rec)))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q, err := NewQueue(s, "/over/"+strings.Repeat("x", 1100000), []string{"lock-"}, FirstHolds)
	if err != nil {
		t.Fatalf("NewQueue with a 1.1 MB path under a 4 MiB limit: %v", err)
	}
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = q.TryAcquire(actx, "lock-", nil)
	acancel()
	if !errors.Is(err, recipe.ErrTooLarge) {
		t.Fatalf("TryAcquire on a path over the server's limit: %v, want ErrTooLarge", err)
	}
	if len(err.Error()) > 1000 {
		t.Fatalf("the error quotes the whole path: %d bytes", len(err.Error()))
	}
	if strings.Count(err.Error(), "recipe: ") != 1 {
		t.Errorf("the error repeats its prefix: %v", err)
	}
	const gaveUp = "cleanup delete given up: the node, if it exists, stays until the session ends"
	serverkit.Eventually(t, 40*time.Second, "the cleaner giving up", func() bool {
		return s.cleaner.pending() == 0 && len(rec.find(gaveUp, "", "")) > 0
	})
	waitState(t, s, recipe.StateReconnected)
	states := s.Listen(ctx)
	other, err := NewQueue(s, "/over-other", []string{"lock-"}, FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	l, err := other.TryAcquire(ctx, "lock-", nil)
	if err != nil {
		t.Fatalf("another path after the refusals: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the drops came every second
	noTransition(t, states)
	if n := len(rec.find(gaveUp, "", "")); n != 1 {
		t.Errorf("the cleaner gave up %d times, want once", n)
	}
	for _, r := range rec.all() {
		r.Attrs(func(a slog.Attr) bool {
			if n := len(a.Value.String()); n > 1000 {
				t.Errorf("%q logs a %d-byte %s", r.Message, n, a.Key)
			}
			return true
		})
	}
}

// TestMessagesNameThePackageOnce (issue 14): an error of several kinds, or
// wrapping another error of this package, says "recipe: " once, and still
// matches every kind.
func TestMessagesNameThePackageOnce(t *testing.T) {
	t.Parallel()
	s := connect(t, zktest.Shared(t).Servers())
	q, err := NewQueue(s, "/once", []string{"lock-"}, FirstHolds)
	if err != nil {
		t.Fatal(err)
	}
	auth := func() error {
		_, err := Connect(context.Background(), []string{"127.0.0.1:2181"}, WithAuth("digest", make([]byte, defaultMaxPacket)))
		return err
	}()
	wrapped := opErr("create", "/once", errorf("%w (%w)", recipe.ErrLeaseLost, fmt.Errorf("%w: disconnected", recipe.ErrSuspended)))
	for _, c := range []struct {
		err  error
		want []error
	}{
		{q.CheckNodeData(make([]byte, MaxNodeData+1)), []error{recipe.ErrBadOption, recipe.ErrTooLarge}},
		{auth, []error{recipe.ErrBadOption, recipe.ErrTooLarge}},
		{wrapped, []error{recipe.ErrLeaseLost, recipe.ErrSuspended}},
	} {
		for _, w := range c.want {
			if !errors.Is(c.err, w) {
				t.Errorf("%v does not match %v", c.err, w)
			}
		}
		if n := strings.Count(fmt.Sprint(c.err), "recipe: "); n != 1 {
			t.Errorf("%q says \"recipe: \" %d times", c.err, n)
		}
	}
	if got, want := q.CheckNodeData(make([]byte, MaxNodeData+1)).Error(),
		"recipe: invalid option: request over the server's size limit: node data of 524289 bytes (at most 524288)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
