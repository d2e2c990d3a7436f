package zookeeper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Head is the first node of a queue at some moment: the holder of an
// exclusive lock, the leader of an election or latch. Present is false when
// the queue is empty (no leader); Node is then the zero Participant.
type Head struct {
	Present bool
	Node    Participant
}

// State is h as recipe.HolderState, a recipe's HolderObserver reports it:
// ID is the node's data when it is non-empty printable UTF-8 of at most
// 256 bytes, else "session 0x<owner>" (binary or hostile data never reaches
// a terminal); Token its czxid; Since its ctime.
func (h Head) State() recipe.HolderState {
	if !h.Present {
		return recipe.HolderState{}
	}
	n := h.Node
	id := string(n.Data)
	if len(n.Data) == 0 || len(n.Data) > 256 || !utf8.Valid(n.Data) || strings.ContainsFunc(id, func(r rune) bool { return !unicode.IsPrint(r) }) {
		id = fmt.Sprintf("session 0x%x", n.SessionID)
	}
	return recipe.HolderState{Held: true, Holder: recipe.Holder{ID: id, Token: n.Token, Since: n.Created}}
}

// ObserveHead reports the first node of the queue at once and after every
// change, a change to "none" (an empty or missing directory, C16) included,
// from one goroutine that never blocks the client's events; a slow reader
// skips intermediate heads but always gets the latest. A read failing on a
// connection loss is retried with the retry policy, any other a second
// later (logged at warning level; the last head stays current); one that
// retrying cannot cure (recipe.Permanent: an ACL refusal, another recipe's
// nodes met twice a second apart) is logged at error level and closes the
// channel, as ctx's end and the Session's Close do; nothing is delivered
// after that. Operations: "Reads" in docs/design.md#acquisition.
func (q *Queue) ObserveHead(ctx context.Context) <-chan Head {
	return zkside.Observe(ctx, q.heads(), func(h Head) Head { return h }, nil)
}

// ObserveHolder delivers Holder's state, as Head.State makes it, at once
// and after every change, as ObserveHead does (a queue with a lock-delay
// also watches its marker); consecutive states differ.
func (q *Queue) ObserveHolder(ctx context.Context) <-chan recipe.HolderState {
	return zkside.Observe(ctx, q.holderHeads(), Head.State, func(a, b recipe.HolderState) bool { return a == b })
}

// heads is the queue's head as zkside.Observe (ObserveHead, and a
// recipe's zkside.ObserveHeadAs) observes it.
func (q *Queue) heads() zkside.Observed[Head] {
	d := &q.d
	return zkside.Observed[Head]{Source: headSource{d}, Go: d.s.spawn, Quit: d.s.quit, Log: d.s.log, Dir: d.dir}
}

// headSource is a queue's zkside.Source.
type headSource struct{ q *qdir }

func (h headSource) Read(ctx context.Context) (Head, <-chan struct{}, func(), error) {
	return h.q.headAndWatch(ctx)
}

// Same reports whether a and b are the same node with the same data (a
// leader's Proclaim of another value is a change), or both no node.
func (headSource) Same(a, b Head) bool {
	return a.Present == b.Present && a.Node.Name == b.Node.Name && bytes.Equal(a.Node.Data, b.Node.Data)
}

// headAndWatch reads the queue head and sets the watch that fires when it
// may have changed: a data watch on the first node (which changes only by
// its deletion: later nodes sort after it), a child watch on an empty
// directory, an exists watch on a missing one. An empty or missing
// directory is read again after its watch is set, so a node created in
// between is not missed.
func (q *qdir) headAndWatch(ctx context.Context) (Head, <-chan struct{}, func(), error) {
	s := q.s
	for {
		h, missing, err := q.readHead(ctx)
		if err != nil {
			return Head{}, nil, nil, err
		}
		w := &wakeup{ch: make(chan struct{})}
		var stop func()
		switch {
		case h.Present:
			stop, err = s.watches.watchPath(ctx, w, dataWatch, q.adir+"/"+h.Node.Name)
		case missing:
			stop, err = s.watches.watchPath(ctx, w, existWatch, q.adir)
		default:
			stop, err = s.watches.watchPath(ctx, w, childWatch, q.adir)
		}
		if err != nil {
			return Head{}, nil, nil, q.wrap("watch", err)
		}
		if h.Present {
			// Written between the read and the watch (a Proclaim), the
			// change would fire nothing: read its Stat again.
			st, err := s.stat(ctx, q.adir+"/"+h.Node.Name, false)
			if err == nil && st.Version == h.Node.Version {
				return h, w.ch, stop, nil
			}
			stop()
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return Head{}, nil, nil, q.wrap("get", err)
			}
			continue
		}
		h2, missing2, err := q.readHead(ctx)
		if err != nil {
			stop()
			return Head{}, nil, nil, err
		}
		if !h2.Present && missing2 == missing {
			return h, w.ch, stop, nil
		}
		stop()
	}
}

// readHead lists the directory and reads the first node; missing reports a
// missing directory (Head is then not Present, as for an empty one).
func (q *qdir) readHead(ctx context.Context) (_ Head, missing bool, _ error) {
	s := q.s
	for {
		var children []string
		err := s.req.retry(ctx, q.reqSize, func() (err error) {
			children, _, err = s.conn.Children(q.adir)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return Head{}, true, nil
		}
		if err != nil {
			return Head{}, false, q.wrap("children", err)
		}
		nodes, k, mixed := parseListing(children, q.kinds)
		if mixed {
			return Head{}, false, q.mixed(k)
		}
		nodes, err = q.order(ctx, nodes, nil)
		if err != nil {
			return Head{}, false, err
		}
		if len(nodes) == 0 {
			return Head{}, false, nil
		}
		p, ok, err := q.participant(ctx, nodes[0])
		if err != nil {
			return Head{}, false, err
		}
		if ok {
			return Head{Present: true, Node: p}, false, nil
		}
		// gone meanwhile: list again
	}
}

// Head returns the queue's first node now (Present false when the queue is
// empty or its directory missing). ZooKeeper operations: getChildren, then
// getData of the first node. Errors: recipe.ErrMixedRecipes when the directory
// holds another recipe's nodes, *recipe.OpError, recipe.ErrSessionClosed, ctx's cause.
func (q *Queue) Head(ctx context.Context) (Head, error) {
	h, _, err := q.d.readHead(ctx)
	return h, err
}

// Participant is one node of a queue, as listed by Participants.
type Participant struct {
	Name      string      // child name
	Kind      string      // node kind
	Seq       int32       // ZooKeeper sequence number
	Token     fence.Token // czxid: the fencing token it holds or will hold
	SessionID int64       // ephemeral owner
	Created   time.Time   // ctime
	Data      []byte      // the data given at Acquire (or written since)
	Version   int32       // the data's version (0 until written: Ticket.SetData)
}

// Participants lists the queue's nodes in queue order (for an exclusive lock
// the first is the holder). Foreign children are left out. ZooKeeper
// operations: getChildren, then getData per node, up to 128 in flight at
// once on the Session (a round trip per 128 nodes; nodes that vanish
// meanwhile are skipped); none is sent once ctx has ended. Errors:
// recipe.ErrMixedRecipes when the directory holds another recipe's nodes
// (as for Acquire: the list would leave out who holds), *recipe.OpError,
// recipe.ErrSessionClosed, ctx's cause. A missing directory gives an empty
// list.
func (q *Queue) Participants(ctx context.Context) ([]Participant, error) {
	return q.d.participants(ctx)
}

// participants is Participants.
func (q *qdir) participants(ctx context.Context) ([]Participant, error) {
	var children []string
	err := q.s.req.retry(ctx, q.reqSize, func() (err error) {
		children, _, err = q.s.conn.Children(q.adir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, q.wrap("children", err)
	}
	nodes, k, mixed := parseListing(children, q.kinds)
	if mixed {
		return nil, q.mixed(k)
	}
	read := make([]Participant, len(nodes))
	found := make([]bool, len(nodes))
	err = readEach(ctx, len(nodes), maxNodeReads, func(i int) (err error) {
		read[i], found[i], err = q.participant(ctx, nodes[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	// Each read gave the node's czxid: order, at the sequence limit, takes
	// it from there instead of reading every node twice.
	byName := make(map[string]int, len(nodes))
	present := nodes[:0]
	for i, n := range nodes {
		if found[i] {
			n.czxid = int64(read[i].Token)
			byName[n.Name] = i
			present = append(present, n)
		}
	}
	if nodes, err = q.order(ctx, present, nil); err != nil {
		return nil, err
	}
	var out []Participant // nil when empty, as before
	if len(nodes) > 0 {
		out = make([]Participant, 0, len(nodes))
	}
	for _, n := range nodes {
		out = append(out, read[byName[n.Name]])
	}
	return out, nil
}

// participant reads node n; ok is false when it is gone.
func (q *qdir) participant(ctx context.Context, n NodeName) (_ Participant, ok bool, _ error) {
	p, _, ok, err := q.readNode(ctx, n)
	return p, ok, err
}
