package valuetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// watchLatestInOrder: a watcher gets the latest, never going back, and a
// deleted then re-created value in order.
func (s *suite) watchLatestInOrder(t *testing.T) {
	const name, writes = "watch", 30
	w, wr := s.h.NewClient(t, name), s.h.NewClient(t, name)
	x := trySet(t, wr, "writer", 0, []byte("w-0"))
	r := newRecorder(t, w)
	defer r.close(t)
	first := r.next(t, "the first value")
	if !same(first, x) {
		t.Errorf("watcher's first value %s, want the current %s", show(first), show(x))
	}
	for i := 1; i <= writes; i++ {
		x = trySet(t, wr, "writer", x.Version, fmt.Appendf(nil, "w-%d", i))
	}
	r.until(t, "the last write", func(y recipe.Versioned) bool { return same(y, x) })
	d, ok := s.h.(Deleter)
	if !ok {
		return
	}
	if err := d.Delete(stepCtx(t), name); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	gone := r.until(t, "the deletion", func(y recipe.Versioned) bool { return y.Version == 0 })
	if y := get(t, wr, "writer"); y.Version != 0 {
		t.Fatalf("writer: Get after the delete = %s, want the value missing", show(y))
	}
	again := trySet(t, wr, "writer", 0, []byte("again"))
	back := r.until(t, "the value made again", func(y recipe.Versioned) bool { return y.Version != 0 })
	if !same(back, again) || back.Rev <= gone.Rev {
		t.Errorf("watcher: after the deletion (%s), %s; want the new value %s with a larger Rev", show(gone), show(back), show(again))
	}
}

// recorder reads one Watch and checks its order.
type recorder struct {
	ch     <-chan recipe.Versioned
	cancel context.CancelFunc
	last   *recipe.Versioned
}

func newRecorder(t *testing.T, c Client) *recorder {
	ctx, cancel := context.WithCancel(context.Background())
	return &recorder{ch: c.Watch(ctx), cancel: cancel}
}

// next returns the next value delivered, checking it against the last.
func (r *recorder) next(t *testing.T, what string) recipe.Versioned {
	t.Helper()
	select {
	case y, ok := <-r.ch:
		if !ok {
			t.Fatalf("watcher: the channel closed while waiting for %s", what)
		}
		if l := r.last; l != nil {
			switch {
			case y.Rev <= l.Rev:
				t.Errorf("watcher: %s delivered after %s: Rev not above the last", show(y), show(*l))
			case y.Version != 0 && l.Version != 0 && y.Version < l.Version:
				t.Errorf("watcher: %s delivered after %s: Version went back without a delete", show(y), show(*l))
			case y.Version == 0 && l.Version == 0:
				t.Errorf("watcher: %s delivered after %s: no change", show(y), show(*l))
			}
		}
		r.last = &y
		return y
	case <-time.After(OpTimeout):
		t.Fatalf("watcher: no value within %v while waiting for %s", OpTimeout, what)
	}
	return recipe.Versioned{}
}

// until reads values until ok holds for one, and returns it.
func (r *recorder) until(t *testing.T, what string, ok func(recipe.Versioned) bool) recipe.Versioned {
	t.Helper()
	deadline := time.Now().Add(OpTimeout)
	for time.Now().Before(deadline) {
		if y := r.next(t, what); ok(y) {
			return y
		}
	}
	t.Fatalf("watcher: no value showing %s within %v (last: %v)", what, OpTimeout, r.last)
	return recipe.Versioned{}
}

// close cancels the watch and checks that its channel closes.
func (r *recorder) close(t *testing.T) {
	t.Helper()
	r.cancel()
	timeout := time.After(OpTimeout)
	for {
		select {
		case _, ok := <-r.ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Errorf("watcher: the channel still open %v after its ctx was cancelled", OpTimeout)
			return
		}
	}
}
