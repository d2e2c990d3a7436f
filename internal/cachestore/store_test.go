package cachestore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func node(p string, created, modified int64, data string) recipe.Node {
	return recipe.Node{Path: p, Data: []byte(data), Created: created, Modified: modified}
}

// next reads one event or fails.
func next(t *testing.T, ch <-chan recipe.CacheEvent) recipe.CacheEvent {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("the channel closed")
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return recipe.CacheEvent{}
}

// TestNeverBack: an older state of a node is ignored; a newer one, or a
// new incarnation, is a change; the same state again is no event.
func TestNeverBack(t *testing.T) {
	s := New(0, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.Listen(ctx)
	s.Put(node("/a", 5, 7, "x"), 7)
	if e := next(t, ch); e.Kind != recipe.NodeCreated || e.Rev != 7 {
		t.Fatalf("%+v", e)
	}
	if s.Put(node("/a", 5, 6, "old"), 9) || s.Put(node("/a", 4, 9, "older incarnation"), 9) {
		t.Error("an older state was taken")
	}
	s.Put(node("/a", 5, 7, "x"), 10) // the same: no event
	s.Put(node("/a", 8, 8, "again"), 11)
	if e := next(t, ch); e.Kind != recipe.NodeChanged || string(e.Node.Data) != "again" || e.Rev != 11 {
		t.Fatalf("%+v", e)
	}
	s.Delete("/a", 3) // a rev below the newest: the event keeps the newest
	if e := next(t, ch); e.Kind != recipe.NodeDeleted || e.Rev != 11 || string(e.Node.Data) != "again" {
		t.Fatalf("%+v", e)
	}
	if n, ok := s.Get("/a"); ok {
		t.Errorf("Get after Delete: %+v", n)
	}
}

// TestLateListenerAndSnapshot: a late listener gets the content sorted,
// then CacheInitialized; Snapshot waits for a consistent state.
func TestLateListenerAndSnapshot(t *testing.T) {
	s := New(0, 0)
	s.Put(node("/b", 1, 1, ""), 1)
	s.Put(node("/a", 2, 2, ""), 2)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Snapshot(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Snapshot before consistent: %v", err)
	}
	s.SetConsistent(true, 2)
	lctx, stop := context.WithCancel(context.Background())
	defer stop()
	ch := s.Listen(lctx)
	for _, want := range []string{"/a", "/b"} {
		if e := next(t, ch); e.Kind != recipe.NodeCreated || e.Node.Path != want {
			t.Fatalf("%+v, want created %s", e, want)
		}
	}
	if e := next(t, ch); e.Kind != recipe.CacheInitialized || e.Rev != 2 {
		t.Fatalf("%+v", e)
	}
	snap, err := s.Snapshot(context.Background())
	if err != nil || snap.Rev != 2 || len(snap.Nodes) != 2 || snap.Nodes[0].Path != "/a" {
		t.Errorf("Snapshot: %+v, %v", snap, err)
	}
	if got := s.Under("/"); len(got) != 2 {
		t.Errorf("Under(/) = %v", got)
	}
	stop()
	for range ch {
	}
}

// TestFull: over a limit the Store stops with ErrCacheFull and closes
// its listeners' channels, even one never read.
func TestFull(t *testing.T) {
	s := New(2, 1<<10)
	ch := s.Listen(context.Background())
	idle := s.Listen(context.Background()) // never read before the stop
	s.Put(node("/a", 1, 1, ""), 1)
	s.Put(node("/b", 2, 2, ""), 2)
	if s.Put(node("/c", 3, 3, ""), 3) {
		t.Error("a third node taken with a limit of 2")
	}
	if err := s.Err(); !errors.Is(err, recipe.ErrCacheFull) {
		t.Fatalf("Err: %v", err)
	}
	for range ch { // closed at once, what was queued dropped
	}
	for range idle {
	}
	if _, err := s.Snapshot(context.Background()); !errors.Is(err, recipe.ErrCacheFull) {
		t.Errorf("Snapshot: %v", err)
	}
	if ch := s.Listen(nil); ch == nil {
		t.Error("nil channel")
	} else if _, ok := <-ch; ok {
		t.Error("a listener of a stopped Store got an event")
	}
	b := New(10, 5)
	if b.Put(node("/abcdef", 1, 1, ""), 1) || !errors.Is(b.Err(), recipe.ErrCacheFull) {
		t.Errorf("a node over the byte limit: %v", b.Err())
	}
}
