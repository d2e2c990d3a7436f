package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// NewCache refuses what New refuses, bad options and a closed Session,
// sending nothing.
func TestCacheBadInputs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t)
	for _, name := range []string{"", "a/_lock_b", "_member_x", "a\x00b", string([]byte{0xff}), strings.Repeat("n", etcdlock.MaxNameLen+1)} {
		if _, err := etcdlock.NewCache(s, name); !errors.Is(err, recipe.ErrInvalidPath) || !errors.Is(err, etcdlock.ErrInvalidName) {
			t.Errorf("NewCache(%.20q): %v, want ErrInvalidPath and ErrInvalidName", name, err)
		}
	}
	bad := map[string]etcdlock.CacheOption{
		"WithCacheMode(7)":        etcdlock.WithCacheMode(7),
		"WithCacheMode(-1)":       etcdlock.WithCacheMode(-1),
		"WithCacheLimits(-1, 0)":  etcdlock.WithCacheLimits(-1, 0),
		"WithCacheLimits(0, -1)":  etcdlock.WithCacheLimits(0, -1),
		"WithCacheLimits(-5, -5)": etcdlock.WithCacheLimits(-5, -5),
	}
	for what, o := range bad {
		if _, err := etcdlock.NewCache(s, "c", o); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("NewCache with %s: %v, want ErrBadOption", what, err)
		}
	}
	if _, err := etcdlock.NewCache(nil, "c"); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("NewCache(nil Session): %v, want ErrBadOption", err)
	}
	c, err := etcdlock.NewCache(s, "/c", nil, etcdlock.WithCacheLimits(0, 0))
	if err != nil {
		t.Fatalf("NewCache with a nil option and default limits: %v", err)
	}
	if c.Name() != "/c" {
		t.Errorf("Name() = %q, want %q", c.Name(), "/c")
	}
	s.Close()
	if _, err := etcdlock.NewCache(s, "c"); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("NewCache on a closed Session: %v, want ErrSessionClosed", err)
	}
	// The Session's Close stopped the cache.
	if err := c.Err(); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("Err of a cache whose Session closed: %v, want ErrSessionClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close after the Session's: %v", err)
	}
}

// Node.Path is the key below the prefix; a leading "/" of the name is
// dropped; the byte limit counts paths and data.
func TestCachePathsAndByteLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t)
	putKey(t, e, "paths/a", "12345")
	c, err := etcdlock.NewCache(s, "/paths")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	snap, err := c.Snapshot(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Nodes) != 1 || snap.Nodes[0].Path != "paths/a" || string(snap.Nodes[0].Data) != "12345" {
		t.Fatalf("Snapshot = %+v, want the node paths/a with 12345", snap)
	}
	if n, ok := c.Get("paths/a"); !ok || n.Created != snap.Nodes[0].Created {
		t.Errorf("Get(paths/a) = %+v, %v", n, ok)
	}
	// "paths/a" and "12345": 12 bytes, within a limit of 20.
	small, err := etcdlock.NewCache(s, "paths", etcdlock.WithCacheLimits(0, 20))
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if _, err := small.Snapshot(opCtx(t)); err != nil {
		t.Fatalf("12 bytes of 20: %v", err)
	}
	putKey(t, e, "paths/a", "1234567890123456") // 23 bytes
	deadline := time.Now().Add(15 * time.Second)
	for !errors.Is(small.Err(), recipe.ErrCacheFull) {
		if time.Now().After(deadline) {
			t.Fatalf("23 bytes with a limit of 20: Err = %v, want ErrCacheFull", small.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, ok := small.Get("paths/a"); ok {
		t.Error("a full cache still holds nodes")
	}
}

// putKey writes key (below the test's prefix) through the inspector.
func putKey(t *testing.T, e *env, key, value string) int64 {
	t.Helper()
	resp, err := e.in.Put(opCtx(t), e.prefix+"/"+key, value)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// A cache cut off while the range changes, whose watch is compacted past
// before it comes back, reads the range again and emits only the
// differences: no event for a key made and deleted meanwhile, one for a
// key written twice, a NodeChanged for a key deleted and made again (a new
// Created), all at the read's revision. The server is the test's own (a
// compaction of the shared one cuts the history other tests read).
func TestCacheCompactionWhileBehind(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	e := &env{srv: srv, prefix: etcdtest.Prefix(t, srv), in: srv.Client(t)}
	logs := &syncBuffer{}
	s, p := e.connect(t, etcdlock.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	for _, k := range []string{"cc", "cc/a", "cc/b", "cc/d"} {
		putKey(t, e, k, "v1")
	}
	c, err := etcdlock.NewCache(s, "cc")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := c.Listen(ctx)
	for ev := range events {
		if ev.Kind == recipe.CacheInitialized {
			break
		}
	}
	before, err := c.Snapshot(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	putKey(t, e, "cc/a", "v2")
	putKey(t, e, "cc/a", "v3")
	if _, err := e.in.Delete(opCtx(t), e.prefix+"/cc/b"); err != nil {
		t.Fatal(err)
	}
	putKey(t, e, "cc/c", "v1")
	if _, err := e.in.Delete(opCtx(t), e.prefix+"/cc/c"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.in.Delete(opCtx(t), e.prefix+"/cc/d"); err != nil {
		t.Fatal(err)
	}
	putKey(t, e, "cc/d", "v1")
	rev := putKey(t, e, "cc/e", "v1")
	if _, err := e.in.Compact(opCtx(t), rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	p.Resume()

	want := map[string]string{"cc/a": "changed v3", "cc/b": "deleted v1", "cc/d": "changed v1", "cc/e": "created v1"}
	got := collect(t, c, events, len(want), rev)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", got, want)
	}
	after, err := c.Snapshot(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if after.Rev < rev || len(after.Nodes) != 4 {
		t.Errorf("Snapshot after = %+v, want Rev >= %d and cc, cc/a, cc/d, cc/e", after, rev)
	}
	for _, n := range after.Nodes {
		if n.Path == "cc/d" && n.Created <= before.Nodes[3].Created {
			t.Errorf("cc/d: Created %d, the deleted one's was %d", n.Created, before.Nodes[3].Created)
		}
	}
	if !strings.Contains(logs.String(), "compacted") {
		t.Errorf("the cache did not log a compaction; its log:\n%s", logs.String())
	}
	select {
	case ev := <-events:
		t.Errorf("an extra event %v of %s", ev.Kind, ev.Node.Path)
	case <-time.After(200 * time.Millisecond):
	}
}

// collect reads n events, one per node, all at one revision of at least
// rev, and returns them by Node.Path as "<kind> <data>".
func collect(t *testing.T, c *etcdlock.Cache, events <-chan recipe.CacheEvent, n int, rev int64) map[string]string {
	t.Helper()
	got := map[string]string{}
	var evRev int64
	timeout := time.After(30 * time.Second)
	for len(got) < n {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the listener closed; Err = %v", c.Err())
			}
			if _, dup := got[ev.Node.Path]; dup {
				t.Errorf("a second event for %s: %v %q", ev.Node.Path, ev.Kind, ev.Node.Data)
			}
			got[ev.Node.Path] = fmt.Sprintf("%v %s", ev.Kind, ev.Node.Data)
			if ev.Rev < rev || evRev != 0 && ev.Rev != evRev {
				t.Errorf("event %v of %s at Rev %d: want the read's revision, one for all, at least %d", ev.Kind, ev.Node.Path, ev.Rev, rev)
			}
			evRev = ev.Rev
		case <-timeout:
			t.Fatalf("after 30 s the events are %v, want %d; Err = %v", got, n, c.Err())
		}
	}
	return got
}

// Close closes every listener's channel at once, even one nobody reads
// with events queued; the listeners' goroutines end (goleak, TestMain).
func TestCacheCloseWithListeners(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, _ := e.connect(t)
	for i := range 20 {
		putKey(t, e, fmt.Sprintf("close/k%02d", i), "v")
	}
	c, err := etcdlock.NewCache(s, "close", etcdlock.WithCacheMode(recipe.CacheChildren))
	if err != nil {
		t.Fatal(err)
	}
	unread := c.Listen(context.Background()) // never read: 21 events queued
	//lint:ignore SA1012 a nil ctx is part of the contract
	nilCtx := c.Listen(nil) //nolint:staticcheck
	if _, err := c.Snapshot(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	if ev := <-nilCtx; ev.Kind != recipe.NodeCreated {
		t.Errorf("first event %v, want NodeCreated", ev.Kind)
	}
	done := make(chan struct{})
	go func() { c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s with an unread listener")
	}
	for _, ch := range []<-chan recipe.CacheEvent{unread, nilCtx} {
		for range ch { // what is queued is dropped: the channel closes soon
		}
	}
	if err := c.Err(); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("Err after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
