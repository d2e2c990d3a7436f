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
	s.Put(node("/a", 5, 8, "y"), 8) // before the first whole state: no event
	s.SetConsistent(true, 8)
	if e := next(t, ch); e.Kind != recipe.NodeCreated || e.Rev != 8 || string(e.Node.Data) != "y" {
		t.Fatalf("%+v", e)
	}
	if e := next(t, ch); e.Kind != recipe.CacheInitialized {
		t.Fatalf("%+v", e)
	}
	if s.Put(node("/a", 5, 7, "old"), 9) || s.Put(node("/a", 4, 9, "older incarnation"), 9) {
		t.Error("an older state was taken")
	}
	s.Put(node("/a", 5, 8, "y"), 10) // the same: no event
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
	s.SetConsistent(true, 0)
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
	if ch := s.Listen(context.TODO()); ch == nil {
		t.Error("nil channel")
	} else if _, ok := <-ch; ok {
		t.Error("a listener of a stopped Store got an event")
	}
	b := New(10, 5)
	if b.Put(node("/abcdef", 1, 1, ""), 1) || !errors.Is(b.Err(), recipe.ErrCacheFull) {
		t.Errorf("a node over the byte limit: %v", b.Err())
	}
}

// TestAccessors: Rev follows what is applied, consistent or not; Len and
// Paths see every node, even one whose parent is not held; Limits are
// New's with the defaults filled in; Size counts the path and the data.
func TestAccessors(t *testing.T) {
	s := New(3, 0)
	if n, b := s.Limits(); n != 3 || b != recipe.DefaultCacheMaxBytes {
		t.Errorf("Limits() = %d, %d", n, b)
	}
	if n, b := New(0, 7).Limits(); n != recipe.DefaultCacheMaxNodes || b != 7 {
		t.Errorf("Limits() of New(0, 7) = %d, %d", n, b)
	}
	if s.Rev() != 0 || s.Len() != 0 || len(s.Paths()) != 0 {
		t.Errorf("empty: Rev %d, Len %d, Paths %v", s.Rev(), s.Len(), s.Paths())
	}
	s.Put(node("r/x/y", 4, 4, ""), 4) // "r/x" is not held
	s.Put(node("r", 2, 2, ""), 2)
	s.SetConsistent(false, 6)
	if got := s.Paths(); s.Len() != 2 || len(got) != 2 || got[0] != "r" || got[1] != "r/x/y" {
		t.Errorf("Len %d, Paths %v, want r, r/x/y", s.Len(), got)
	}
	if s.Rev() != 6 {
		t.Errorf("Rev() = %d, want 6", s.Rev())
	}
	s.Delete("r", 7)
	if s.Rev() != 7 || s.Len() != 1 {
		t.Errorf("after Delete: Rev %d, Len %d", s.Rev(), s.Len())
	}
	if got := Size(node("ab", 1, 1, "xyz")); got != 5 {
		t.Errorf("Size = %d, want 5", got)
	}
}
