package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
)

// Snapshot is a queue's nodes as the server held them at one point of its
// order (group membership's view).
type Snapshot struct {
	// Rev is the zxid of the last change of the queue at that point (a
	// node created, deleted or written; for a missing directory, a zxid
	// the server had reached): a later state of the queue has a larger Rev.
	Rev int64
	// Nodes in queue order, each with its data and its data version.
	Nodes []Participant
}

// ErrUnstable is returned by Snapshot when the directory changed during
// every one of its reads (snapshotTries): the queue churns faster than it
// can be read whole.
var ErrUnstable = errors.New("recipe: the directory kept changing while it was read")

// snapshotTries bounds Snapshot's reads before ErrUnstable.
const snapshotTries = 10

// Snapshot reads the queue's nodes as the server held them at one point of
// its order. ZooKeeper operations: sync, getChildren, getData per node,
// then exists on the directory and per node (a read twice over, pipelined
// as Participants'): the snapshot is taken only when the second pass finds
// the directory's pzxid and every node's mzxid unchanged, so every node was
// as read at a point between the passes; else it reads again, up to 10
// times (ErrUnstable). Foreign children are left out. Errors: as
// Participants, and ErrUnstable.
func (q *Queue) Snapshot(ctx context.Context) (Snapshot, error) {
	return q.d.snapshot(ctx, nil)
}

// ObserveSnapshots delivers the queue's Snapshot at once and after every
// change, as ObserveHead delivers heads (coalesced; a slow reader gets the
// latest; reads that fail are retried, one retrying cannot cure closes the
// channel), and never one with a Rev below the last delivered. It sets a
// child watch on the directory and a data watch on every node.
func (q *Queue) ObserveSnapshots(ctx context.Context) <-chan Snapshot {
	d := &q.d
	o := zkside.Observed[Snapshot]{Source: snapshotSource{d}, Go: d.s.spawn, Quit: d.s.quit, Log: d.s.log, Dir: d.dir, What: "queue snapshot"}
	return zkside.Observe(ctx, o, func(s Snapshot) Snapshot { return s }, nil)
}

// snapshotSource is a queue's snapshots as zkside.Observe reads them.
type snapshotSource struct{ q *qdir }

func (s snapshotSource) Read(ctx context.Context) (Snapshot, <-chan struct{}, func(), error) {
	w := &wakeup{ch: make(chan struct{})}
	var mu sync.Mutex // the watches are set from readEach's goroutines
	var stops []func()
	stop := func() {
		for _, f := range stops {
			f()
		}
	}
	snap, err := s.q.snapshot(ctx, func(p string, kind watchKind) error {
		f, err := s.q.s.watches.watchPath(ctx, w, kind, p)
		if err == nil {
			mu.Lock()
			stops = append(stops, f)
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		stop()
		return Snapshot{}, nil, nil, err
	}
	return snap, w.ch, stop, nil
}

// Same reports whether a reader that has a has nothing newer in b.
func (snapshotSource) Same(a, b Snapshot) bool { return b.Rev <= a.Rev }

// snapshot is Snapshot; watch, if set, is called to set the watches that
// fire after the snapshot's point (after the first pass, before the
// second): on the directory (child watch, or exists watch when missing)
// and every node. A watch set by a pass that had to read again may have
// fired: the observer then reads once more.
func (q *qdir) snapshot(ctx context.Context, watch func(path string, kind watchKind) error) (Snapshot, error) {
	s := q.s
	err := s.req.retry(ctx, q.reqSize, func() error {
		_, err := s.conn.Sync(q.adir)
		return err
	})
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return Snapshot{}, q.wrap("sync", err)
	}
	for range snapshotTries {
		snap, ok, err := q.snapshotOnce(ctx, watch)
		if err != nil || ok {
			return snap, err
		}
	}
	return Snapshot{}, fmt.Errorf("%w: %d reads of %s", ErrUnstable, snapshotTries, q.dir)
}

// snapshotOnce reads the queue twice over; ok is false when it changed in
// between.
func (q *qdir) snapshotOnce(ctx context.Context, watch func(string, watchKind) error) (_ Snapshot, ok bool, _ error) {
	s := q.s
	var children []string
	var dst *zk.Stat
	err := s.req.retry(ctx, q.reqSize, func() (err error) {
		children, dst, err = s.conn.Children(q.adir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return q.missingSnapshot(ctx, watch)
	}
	if err != nil {
		return Snapshot{}, false, q.wrap("children", err)
	}
	nodes, k, mixed := parseListing(children, q.kinds)
	if mixed {
		return Snapshot{}, false, q.mixed(k)
	}
	read := make([]Participant, len(nodes))
	mzxid := make([]int64, len(nodes))
	found := make([]bool, len(nodes))
	err = readEach(ctx, len(nodes), maxNodeReads, func(i int) (err error) {
		read[i], mzxid[i], found[i], err = q.readNode(ctx, nodes[i])
		return err
	})
	if err != nil {
		return Snapshot{}, false, err
	}
	for i := range nodes {
		if !found[i] {
			return Snapshot{}, false, nil // deleted meanwhile: the pzxid moved
		}
	}
	if watch != nil {
		// Set after the first pass, before the second: a change between
		// the two is seen by the second, one after it fires a watch.
		if err := watch(q.adir, childWatch); err != nil {
			return Snapshot{}, false, q.wrap("watch", err)
		}
		err = readEach(ctx, len(nodes), maxNodeReads, func(i int) error {
			return watch(q.adir+"/"+nodes[i].Name, dataWatch)
		})
		if err != nil {
			return Snapshot{}, false, q.wrap("watch", err)
		}
	}
	same, err := q.unchanged(ctx, dst.Pzxid, nodes, mzxid)
	if err != nil || !same {
		return Snapshot{}, false, err
	}
	rev := dst.Pzxid
	byName := make(map[string]int, len(nodes))
	for i, n := range nodes {
		rev = max(rev, mzxid[i])
		nodes[i].czxid = int64(read[i].Token)
		byName[n.Name] = i
	}
	if nodes, err = q.order(ctx, nodes, nil); err != nil {
		return Snapshot{}, false, err
	}
	out := make([]Participant, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, read[byName[n.Name]])
	}
	return Snapshot{Rev: rev, Nodes: out}, true, nil
}

// missingSnapshot is the snapshot of a missing directory: empty, at the
// zxid the Session has seen (at least the deletion's, read after it), with
// an exists watch set and the directory read again after it.
func (q *qdir) missingSnapshot(ctx context.Context, watch func(string, watchKind) error) (Snapshot, bool, error) {
	rev := q.s.wire.zxid.Last()
	if watch == nil {
		return Snapshot{Rev: rev}, true, nil
	}
	if err := watch(q.adir, existWatch); err != nil {
		return Snapshot{}, false, q.wrap("watch", err)
	}
	var there bool
	err := q.s.req.retry(ctx, q.reqSize, func() (err error) {
		there, _, err = q.s.conn.Exists(q.adir)
		return err
	})
	if err != nil {
		return Snapshot{}, false, q.wrap("exists", err)
	}
	return Snapshot{Rev: rev}, !there, nil
}

// readNode reads node n: its Participant and mzxid; ok is false when gone.
func (q *qdir) readNode(ctx context.Context, n NodeName) (_ Participant, mzxid int64, ok bool, _ error) {
	var data []byte
	var st *zk.Stat
	err := q.s.req.retry(ctx, q.reqSize, func() (err error) {
		data, st, err = q.s.conn.Get(q.adir + "/" + n.Name)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return Participant{}, 0, false, nil
	}
	if err != nil {
		return Participant{}, 0, false, q.wrap("get", err)
	}
	return Participant{Name: n.Name, Kind: n.Kind, Seq: n.Seq, Token: fence.Token(st.Czxid),
		SessionID: st.EphemeralOwner, Created: time.UnixMilli(st.Ctime), Data: data, Version: st.Version}, st.Mzxid, true, nil
}

// unchanged is the second pass: the directory's pzxid and every node's
// mzxid as in the first.
func (q *qdir) unchanged(ctx context.Context, pzxid int64, nodes []NodeName, mzxid []int64) (bool, error) {
	var there bool
	var st *zk.Stat
	err := q.s.req.retry(ctx, q.reqSize, func() (err error) {
		there, st, err = q.s.conn.Exists(q.adir)
		return err
	})
	if err != nil {
		return false, q.wrap("exists", err)
	}
	if !there || st.Pzxid != pzxid {
		return false, nil
	}
	moved := make([]bool, len(nodes))
	err = readEach(ctx, len(nodes), maxNodeReads, func(i int) error {
		var ok bool
		var st *zk.Stat
		err := q.s.req.retry(ctx, q.reqSize, func() (err error) {
			ok, st, err = q.s.conn.Exists(q.adir + "/" + nodes[i].Name)
			return err
		})
		moved[i] = err == nil && (!ok || st.Mzxid != mzxid[i])
		return err
	})
	if err != nil {
		return false, q.wrap("exists", err)
	}
	for _, m := range moved {
		if m {
			return false, nil
		}
	}
	return true, nil
}
