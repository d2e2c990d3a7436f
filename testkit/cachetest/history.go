package cachetest

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// historyWrites is how many writes a history makes once the cache exists.
const historyWrites = 60

// fault runs the history check of a tree cache with the fault start
// injected a third of the way through and healed at two thirds; a nil
// start skips it.
func (s *suite) fault(t *testing.T, root, name string, start func(testing.TB, recipe.Cache) func()) {
	if start == nil {
		t.Skipf("the harness has no %s hook (Faults.%s is nil)", name, name)
	}
	s.history(t, root, recipe.CacheTree, start)
}

// history: a sequential writer's history while a cache follows it (see
// the package documentation), with an optional fault.
func (s *suite) history(t *testing.T, root string, mode recipe.CacheMode, fault func(testing.TB, recipe.Cache) func()) {
	w := newWriter(t, s.h, root, seed(t))
	for _, rel := range []string{root, root + "/a", root + "/a/x", root + "-s"} {
		w.put(rel)
	}
	w.mark()
	c := s.h.NewCache(t, root, mode, 0)
	early := listen(t, c, "the early listener")
	sn := watchSnapshots(c, w, mode)
	defer sn.halt()
	var late *recorder
	heal := func() {}
	for i := range historyWrites {
		switch {
		case i == historyWrites/2:
			late = listen(t, c, "the late listener")
		case fault != nil && i == historyWrites/3:
			heal = fault(t, c)
		case fault != nil && i == 2*historyWrites/3:
			heal()
		}
		w.step()
		pause := time.Duration(w.rnd.IntN(3)) * time.Millisecond
		if fault != nil && i >= historyWrites/3 && i < 2*historyWrites/3 {
			pause += 10 * time.Millisecond // the fault lasts a while
		}
		time.Sleep(pause)
	}
	final := w.share(w.nodes, mode)
	waitSnapshot(t, c, "the cache", final)
	early.waitContent(t, final)
	late.waitContent(t, final)
	sn.halt()
	early.stop(t)
	late.stop(t)
	for _, e := range sn.check(w.shares(mode)) {
		t.Error(e)
	}
	checkEvents(t, early, w, mode)
	checkEvents(t, late, w, mode)
	if err := c.Err(); err != nil {
		t.Errorf("the cache: Err = %v after the history, want nil", err)
	}
}

// snapshots takes a cache's Snapshots and Gets over and over while a
// history is written.
type snapshots struct {
	stop chan struct{}
	done chan struct{}
	// Written by the goroutine only, read after done.
	snaps []recipe.CacheSnapshot
	errs  []string
}

// watchSnapshots starts taking c's Snapshots (and after each, a Get of
// every node of the universe, which must not go back from it).
func watchSnapshots(c recipe.Cache, w *writer, mode recipe.CacheMode) *snapshots {
	sn := &snapshots{stop: make(chan struct{}), done: make(chan struct{})}
	paths := map[string]string{} // Node.Path → rel, of the universe
	for p, rel := range w.toRel {
		paths[p] = rel
	}
	go func() {
		defer close(sn.done)
		last := map[string]int{} // per Node.Path, the newest write index seen
		for {
			select {
			case <-sn.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
			snap, err := c.Snapshot(ctx)
			cancel()
			if err != nil {
				sn.errs = append(sn.errs, fmt.Sprintf("the cache: Snapshot: %v", err))
				return
			}
			sn.snaps = append(sn.snaps, snap)
			sn.gets(c, paths, last, w.root, mode)
			time.Sleep(time.Millisecond)
		}
	}()
	return sn
}

// gets checks each node's Get against the newest data seen of it; the
// write indexes are learnt from the data ("d<index>").
func (sn *snapshots) gets(c recipe.Cache, paths map[string]string, last map[string]int, root string, mode recipe.CacheMode) {
	for p, rel := range paths {
		n, ok := c.Get(p)
		if !ok {
			continue
		}
		var idx int
		if _, err := fmt.Sscanf(string(n.Data), "d%d", &idx); err != nil || !inShare(root, mode, rel) || nodeProblem(n) != "" {
			sn.errs = append(sn.errs, fmt.Sprintf("the cache: Get(%q) = %+v: not a node of its share as written", p, n))
			continue
		}
		if idx < last[p] {
			sn.errs = append(sn.errs, fmt.Sprintf("the cache: Get(%q) went back to data %q (d%d was seen)", p, n.Data, last[p]))
		}
		last[p] = max(last[p], idx)
	}
}

// halt stops taking snapshots and waits for the goroutine. Idempotent.
func (sn *snapshots) halt() {
	select {
	case <-sn.stop:
	default:
		close(sn.stop)
	}
	<-sn.done
}

// check returns what is wrong with the snapshots taken, against the
// history's shares: each must be one of them, never going back, and Rev
// never goes back (one Rev, one content).
func (sn *snapshots) check(states []map[string]string) []string {
	errs := sn.errs
	from, prev := 0, map[string]string(nil)
	var rev int64
	for i, snap := range sn.snaps {
		content, why := contentOf(snap)
		switch {
		case why != "":
			errs = append(errs, fmt.Sprintf("the cache: Snapshot %d: %s", i, why))
		case snap.Rev < rev:
			errs = append(errs, fmt.Sprintf("the cache: Snapshot %d: Rev %d, below the previous one's %d", i, snap.Rev, rev))
		case snap.Rev == rev && prev != nil && !maps.Equal(prev, content):
			errs = append(errs, fmt.Sprintf("the cache: Snapshot %d: Rev %d as the previous one, but %s, not %s", i, rev, show(content), show(prev)))
		}
		if why != "" {
			continue
		}
		j := match(states, content, from)
		if j < 0 {
			errs = append(errs, fmt.Sprintf("the cache: Snapshot %d (Rev %d) holds %s, no state of the history from the %dth on", i, snap.Rev, show(content), from))
			continue
		}
		from, prev, rev = j, content, max(rev, snap.Rev)
		if len(errs) >= 5 {
			break
		}
	}
	return errs
}
