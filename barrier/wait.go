package barrier

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// The double barrier's rules, on snapshots of its directory (Queue.Snapshot:
// the nodes as the server held them at one point P of its order, and Rev,
// the zxid of the directory's last change at P).
//
// A participant's node carries a header line "n mark": the count it was
// made with, and 0 until it has entered, then the mark: the Rev of a
// snapshot that held at least n participant nodes. "Nodes" below are the
// ephemeral ones whose header carries the caller's n and a mark no later
// than the snapshot's Rev: nodes of another count (refused by enterRule's
// check), persistent ones, forged marks and data no participant wrote are
// not counted.
//
// Enter (enterRule), for the caller's node C (czxid c) present in a
// snapshot: entered when the snapshot holds n nodes (mark: its Rev), or
// when a node carries a mark m >= c (mark: m). Never a state the server did
// not have: a mark m is the Rev of a snapshot at a point P with at least n
// nodes; C was created at c <= m <= zxid(P) and exists now, so it existed
// at P (names are never reused): C was one of those n.
//
// Leave (allMarked) deletes the caller's node only once a snapshot shows
// every node of its round marked (every node made no later than the
// caller's mark: later ones wait for the next round), then waits until the
// nodes that snapshot showed marked are gone (noneLeft).
//
// The race (fast participants enter and leave before a slow one S reads a
// full snapshot): let P0 be the first point at which the directory held n
// nodes, S's among them. A first mark needs a snapshot at or after P0, so
// a Leave's allMarked snapshot, taken after its own mark, shows S until S
// marks: no Leave deletes a node while S is unmarked (S's czxid is at most
// any such Leave's mark: its mark is the Rev of a snapshot showing S, or
// covers one). A mark made while S
// is present is the Rev of a snapshot showing S: at least S's czxid. So
// S's next snapshot (any change fires its watches) shows P0's n nodes, or,
// if an owner cancelled or crashed, a node that entered and covers S: S
// enters. Only the crash of every entered node before S reads (their
// sessions' expiry) leaves S waiting, for new participants.

// enterRule is Enter's rule for the caller's node name. Only nodes made
// with the caller's count count; the oldest node not entered yet sets the
// count of the round forming, and a caller with another gets
// ErrCountMismatch (the older one waits on, not counting it).
func (b *DoubleBarrier) enterRule(name string) func(zookeeper.Snapshot) (bool, int64, error) {
	return func(snap zookeeper.Snapshot) (bool, int64, error) {
		var own int64
		var ours []zookeeper.Participant
		ref := 0
		for _, p := range snap.Nodes {
			n, m, ok := parseHeader(p.Data)
			if ok && m == 0 && ref == 0 && p.SessionID != 0 {
				ref = n
				if n != b.n {
					return false, 0, fmt.Errorf("%w: %s: node %s has %d, this participant %d", ErrCountMismatch, b.dir, p.Name, n, b.n)
				}
			}
			if ok && n == b.n && p.SessionID != 0 && m <= snap.Rev {
				ours = append(ours, p)
			}
			if p.Name == name {
				own = int64(p.Token)
			}
		}
		if len(ours) >= b.n {
			return true, snap.Rev, nil
		}
		for _, p := range ours {
			if _, m, _ := parseHeader(p.Data); m >= own {
				return true, m, nil
			}
		}
		return false, 0, nil
	}
}

// allMarked is Leave's rule before its delete, for a caller that entered
// with mark: every node of the caller's round has entered (nodes made
// after mark wait for the next round, and may need this caller to form
// it: they are not waited for). It records the marked nodes it saw in
// *round, the ones noneLeft waits for.
func (b *DoubleBarrier) allMarked(mark int64, round *map[string]bool) func(zookeeper.Snapshot) (bool, int64, error) {
	return func(snap zookeeper.Snapshot) (bool, int64, error) {
		marked := map[string]bool{}
		for _, p := range b.nodes(snap) {
			_, m, _ := parseHeader(p.Data)
			switch {
			case m > 0:
				marked[p.Name] = true
			case int64(p.Token) <= mark:
				return false, 0, nil
			}
		}
		*round = marked
		return true, 0, nil
	}
}

// noneLeft is Leave's rule after its delete: every node of round (the
// participants entered when this caller could leave) has gone. Nodes
// marked since belong to a later round, which must not hold this Leave.
func (b *DoubleBarrier) noneLeft(round map[string]bool) func(zookeeper.Snapshot) (bool, int64, error) {
	return func(snap zookeeper.Snapshot) (bool, int64, error) {
		for _, p := range snap.Nodes {
			if round[p.Name] {
				return false, 0, nil
			}
		}
		return true, 0, nil
	}
}

// nodes are the participant nodes of snap made with the caller's count:
// ephemeral (a persistent node is no participant, whoever made it) with a
// header of the caller's n whose mark is no later than the snapshot (a
// mark is the Rev of an earlier snapshot: a later one is forged).
func (b *DoubleBarrier) nodes(snap zookeeper.Snapshot) []zookeeper.Participant {
	var out []zookeeper.Participant
	for _, p := range snap.Nodes {
		if n, m, ok := parseHeader(p.Data); ok && n == b.n && p.SessionID != 0 && m <= snap.Rev {
			out = append(out, p)
		}
	}
	return out
}

// until follows the directory's snapshots until rule says done, and returns
// its mark. With t, the caller's node must live: its absence from a
// snapshot, or its session's loss, ends the wait with t's error.
func (b *DoubleBarrier) until(ctx context.Context, t *zookeeper.Ticket, rule func(zookeeper.Snapshot) (bool, int64, error)) (int64, error) {
	var lost <-chan struct{} // nil without t: never fires
	var err error
	if t != nil {
		if lost, err = b.lostOf(t); err != nil {
			return 0, err
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the observer, and its watch registrations
	snaps := b.q.ObserveSnapshots(wctx)
	for {
		select {
		case snap, ok := <-snaps:
			if !ok {
				return 0, b.stopped(ctx)
			}
			if t != nil && !holds(snap, t.Name()) {
				return 0, gone(t)
			}
			done, mark, err := rule(snap)
			if err != nil || done {
				return mark, err
			}
		case <-lost:
			if lost, err = b.lostOf(t); err != nil {
				return 0, err
			}
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
	}
}

// lostOf returns a channel closed when t's ZooKeeper session is lost, or
// t's error if it is dead already. (Done is taken first: if t still lives
// after, its session was the current one.)
func (b *DoubleBarrier) lostOf(t *zookeeper.Ticket) (<-chan struct{}, error) {
	ch := b.s.Done()
	if err := t.Err(); err != nil {
		return nil, err
	}
	return ch, nil
}

// stopped says why the observer closed its channel before ctx ended: the
// Session closed, or a read retrying cannot cure (one more read returns
// its error).
func (b *DoubleBarrier) stopped(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if _, err := b.q.Snapshot(ctx); err != nil {
		return err
	}
	return fmt.Errorf("barrier: %s: the directory's watch ended (see the log)", b.dir)
}

// holds reports whether snap holds the node named name.
func holds(snap zookeeper.Snapshot, name string) bool {
	for _, p := range snap.Nodes {
		if p.Name == name {
			return true
		}
	}
	return false
}

// gone is the error of t's node missing from a snapshot.
func gone(t *zookeeper.Ticket) error {
	if err := t.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s", recipe.ErrNodeDeleted, t.Name())
}

// encode is the participant's node data with mark (0: not entered).
func (b *DoubleBarrier) encode(mark int64) []byte {
	return append(fmt.Appendf(nil, "%d %d\n", b.n, mark), b.data...)
}

// parseHeader reads a participant node's header; ok is false for data no
// participant wrote.
func parseHeader(data []byte) (n int, mark int64, ok bool) {
	line, _, found := bytes.Cut(data, []byte("\n"))
	ns, ms, sp := bytes.Cut(line, []byte(" "))
	if !found || !sp {
		return 0, 0, false
	}
	n, err1 := strconv.Atoi(string(ns))
	mark, err2 := strconv.ParseInt(string(ms), 10, 64)
	return n, mark, err1 == nil && err2 == nil && n > 0 && mark >= 0
}
