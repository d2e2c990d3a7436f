package zookeeper

import (
	"context"
	"log/slog"

	"github.com/zkrecipes/zkrecipes/internal/zkside"
)

// Observe delivers the node now and after every change, coalesced: a slow
// reader skips states but always gets the latest, never one with a Zxid
// below the last delivered. It follows the node with the Session's shared
// one-shot watches, set before each read and set again after a
// reconnection (a lost session fires them: the node is read again). A
// failed read is retried as ObserveHead's are, logged to log (nil: the
// Session's); the channel closes on one retrying cannot cure, when ctx
// ends (nil never ends) or the Session is closed.
func (n *ValueNode) Observe(ctx context.Context, log *slog.Logger) <-chan NodeValue {
	if ctx == nil {
		ctx = context.Background()
	}
	if log == nil {
		log = n.s.log
	}
	o := zkside.Observed[NodeValue]{Source: valueSource{n}, Go: n.s.spawn, Quit: n.s.quit, Log: log, Dir: n.path, What: "value node"}
	return zkside.Observe(ctx, o, func(v NodeValue) NodeValue { return v }, nil)
}

// valueSource is a ValueNode's zkside.Source.
type valueSource struct{ n *ValueNode }

// Read reads the node, sets the watch its state calls for, and reads it
// again: the second read is returned, so that every change after it fires
// the watch (one between the two reads has fired it already, or made the
// watch fire at once).
func (v valueSource) Read(ctx context.Context) (NodeValue, <-chan struct{}, func(), error) {
	n := v.n
	first, err := n.read(ctx, false)
	if err != nil {
		return NodeValue{}, nil, nil, err
	}
	kind := dataWatch
	if !first.Exists {
		kind = existWatch
	}
	w := &wakeup{ch: make(chan struct{})}
	stop, err := n.s.watches.watchPath(ctx, w, kind, n.full)
	if err != nil {
		return NodeValue{}, nil, nil, n.wrap("watch", err)
	}
	cur, err := n.read(ctx, false)
	if err != nil {
		stop()
		return NodeValue{}, nil, nil, err
	}
	return cur, w.ch, stop, nil
}

// Same reports whether a reader that has a has nothing new in b: both
// missing, or the same write.
func (valueSource) Same(a, b NodeValue) bool {
	return a.Exists == b.Exists && (!a.Exists || a.Zxid == b.Zxid)
}
