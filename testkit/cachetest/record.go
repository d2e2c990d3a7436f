package cachetest

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// recorder keeps every event of one listener.
type recorder struct {
	who    string
	cancel context.CancelFunc
	closed chan struct{} // closed when the channel closed

	mu  sync.Mutex
	evs []recipe.CacheEvent
}

// listen starts a listener of c (its context ends at t's cleanup, or with
// stop) and records its events.
func listen(t *testing.T, c recipe.Cache, who string) *recorder {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return record(c.Listen(ctx), who, cancel)
}

// record records the events of ch; cancel ends its listener's context.
func record(ch <-chan recipe.CacheEvent, who string, cancel context.CancelFunc) *recorder {
	r := &recorder{who: who, cancel: cancel, closed: make(chan struct{})}
	go func() {
		defer close(r.closed)
		for ev := range ch {
			r.mu.Lock()
			r.evs = append(r.evs, ev)
			r.mu.Unlock()
		}
	}()
	return r
}

// events returns a copy of the events so far.
func (r *recorder) events() []recipe.CacheEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recipe.CacheEvent(nil), r.evs...)
}

// replay applies the events so far to an empty map and returns the
// content (Node.Path → data) and whether CacheInitialized came.
func (r *recorder) replay() (map[string]string, bool) {
	content, init := map[string]string{}, false
	for _, ev := range r.events() {
		switch ev.Kind {
		case recipe.NodeCreated, recipe.NodeChanged:
			content[ev.Node.Path] = string(ev.Node.Data)
		case recipe.NodeDeleted:
			delete(content, ev.Node.Path)
		case recipe.CacheInitialized:
			init = true
		}
	}
	return content, init
}

// waitContent waits until the listener, initialized, holds want; else it
// fails t and returns (the events are checked next, which says more).
func (r *recorder) waitContent(t *testing.T, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(OpTimeout)
	for {
		got, init := r.replay()
		if init && maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: after %v its events give %s (initialized %v), want %s", r.who, OpTimeout, show(got), init, show(want))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop ends the listener's context and waits for its channel to close.
func (r *recorder) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	r.waitClosed(t, "its context ended")
}

// waitClosed fails t if the channel does not close within OpTimeout.
func (r *recorder) waitClosed(t *testing.T, why string) {
	t.Helper()
	select {
	case <-r.closed:
	case <-time.After(OpTimeout):
		t.Fatalf("%s: the channel is still open %v after %s", r.who, OpTimeout, why)
	}
}

// held is a node as a listener's events leave it.
type held struct {
	n   recipe.Node
	idx int // the writer's index of its data
}

// eventCheck checks one listener's events against a writer's history.
type eventCheck struct {
	w      *writer
	mode   recipe.CacheMode
	states []map[string]string // the history's shares
	errs   []string

	content map[string]held
	gone    map[string]held // the last incarnation deleted, per path
	rev     int64
	init    bool
}

func (k *eventCheck) fail(i int, ev recipe.CacheEvent, format string, args ...any) {
	k.errs = append(k.errs, fmt.Sprintf("event %d (%v %q Rev %d): %s", i, ev.Kind, ev.Node.Path, ev.Rev, fmt.Sprintf(format, args...)))
}

// checkEvents checks r's events (see the package documentation) and
// reports what it finds on t; their end must give the history's last
// state.
func checkEvents(t *testing.T, r *recorder, w *writer, mode recipe.CacheMode) {
	t.Helper()
	k := &eventCheck{w: w, mode: mode, states: w.shares(mode), content: map[string]held{}, gone: map[string]held{}}
	for i, ev := range r.events() {
		if ev.Rev < k.rev {
			k.fail(i, ev, "Rev went back from %d", k.rev)
		}
		k.rev = max(k.rev, ev.Rev)
		if ev.Kind == recipe.CacheInitialized {
			k.initialized(i, ev)
			continue
		}
		k.node(i, ev)
		if len(k.errs) >= 5 {
			break
		}
	}
	if !k.init {
		k.errs = append(k.errs, "no CacheInitialized")
	}
	if got, want := k.plain(), k.states[len(k.states)-1]; !maps.Equal(got, want) {
		k.errs = append(k.errs, fmt.Sprintf("the events end with %s, want the last state %s", show(got), show(want)))
	}
	for _, e := range k.errs {
		t.Errorf("%s: %s", r.who, e)
	}
}

// initialized checks that the events before it give one of the states.
func (k *eventCheck) initialized(i int, ev recipe.CacheEvent) {
	if k.init {
		k.fail(i, ev, "a second CacheInitialized")
	}
	k.init = true
	if c := k.plain(); match(k.states, c, 0) < 0 {
		k.fail(i, ev, "the events before it give %s, no state of the history", show(c))
	}
}

// node checks one node event against what the events before it hold.
func (k *eventCheck) node(i int, ev recipe.CacheEvent) {
	n := ev.Node
	if rel, ok := k.w.toRel[n.Path]; ok && !inShare(k.w.root, k.mode, rel) {
		k.fail(i, ev, "a node outside the cache's share")
	}
	if ev.Kind != recipe.NodeDeleted && ev.Kind != recipe.NodeCreated && ev.Kind != recipe.NodeChanged {
		k.fail(i, ev, "an unknown kind %d", int(ev.Kind))
		return
	}
	if !k.init && ev.Kind != recipe.NodeCreated {
		k.fail(i, ev, "before CacheInitialized: want NodeCreated only")
	}
	if p := nodeProblem(n); p != "" {
		k.fail(i, ev, "%s", p)
	}
	old, had := k.content[n.Path]
	switch {
	case ev.Kind == recipe.NodeCreated && had:
		k.fail(i, ev, "NodeCreated for a node held (%q)", old.n.Data)
	case ev.Kind != recipe.NodeCreated && !had:
		k.fail(i, ev, "for a node not held")
	case ev.Kind == recipe.NodeDeleted:
		if o := old.n; o.Created != n.Created || o.Modified != n.Modified || string(o.Data) != string(n.Data) {
			k.fail(i, ev, "carries %+v, the node held is %+v", n, o)
		}
		delete(k.content, n.Path)
		k.gone[n.Path] = old
		return
	case ev.Kind == recipe.NodeCreated && n.Created <= k.gone[n.Path].n.Created:
		k.fail(i, ev, "Created %d, not after the incarnation deleted before (%d)", n.Created, k.gone[n.Path].n.Created)
	case had && (n.Created < old.n.Created || n.Created == old.n.Created && n.Modified < old.n.Modified):
		k.fail(i, ev, "went back from Created %d Modified %d to %d %d", old.n.Created, old.n.Modified, n.Created, n.Modified)
	}
	idx, why := k.w.writeIndex(n.Path, n.Data)
	if why != "" {
		k.fail(i, ev, "%s", why)
	} else if last := max(old.idx, k.gone[n.Path].idx); idx < last {
		k.fail(i, ev, "data %q was written before data the events showed there earlier", n.Data)
	}
	k.content[n.Path] = held{n: n, idx: idx}
}

// plain returns the content held, by Node.Path → data.
func (k *eventCheck) plain() map[string]string {
	out := map[string]string{}
	for p, h := range k.content {
		out[p] = string(h.n.Data)
	}
	return out
}
