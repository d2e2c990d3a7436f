package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// waiter is one wait of a ticket's node for its grant, the engine's core
// loop: list the directory, ask the Rule, grant or watch the nodes it
// names, wake, list again. It owns the wait's state: the ticket and its
// epoch, the fast paths' (fast.go, wake.go: called at named points, each
// falling back to the plain step), the czxids read at the sequence limit
// and the waiting gauge. Without block (TryAcquire) a node the Rule does
// not grant is recipe.ErrLocked. See docs/design.md#acquisition.
type waiter struct {
	q      *Queue
	d      *qdir
	t      *Ticket
	ep     *epoch
	block  bool
	fw     *fastWait
	czxids map[string]int64 // at the sequence limit: see order
	gauge  waitGauge
}

// run waits for t's grant. With fs (an Acquire's) the first listing is the
// one pipelined behind the create.
func (w *waiter) run(ctx context.Context, fs *fastStart) (*lease, error) {
	// Every wait also ends when the node's session is lost.
	ep := w.ep
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(ep.ctx, func() { cancel(context.Cause(ep.ctx)) })()
	w.fw = w.q.startFast(ctx, fs, w.block)
	defer w.fw.drop()
	defer w.gauge.end()
	w.czxids = map[string]int64{}
	for {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		l, again, err := w.step(ctx)
		if err != nil || !again {
			return l, err
		}
	}
}

// step is one pass of the loop: it returns the grant, an error, or again
// to list once more.
func (w *waiter) step(ctx context.Context) (_ *lease, again bool, _ error) {
	d, fw := w.d, w.fw
	// List.
	children, dv, piped, err := w.list(ctx)
	if err != nil {
		return nil, false, err
	}
	// Ask the Rule (a queue declared RuleFromDirData: the one of the
	// directory's data at or after the listing; dirrule.go).
	c, err := w.q.contractAt(ctx, dv)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, false, d.vanished(w.ep) // the directory went, and our node with it
	}
	if err != nil {
		return nil, false, err
	}
	v, err := w.q.verdictOn(ctx, c, children, w.t.name, w.czxids, fw.pre != nil)
	if err != nil {
		return nil, false, err
	}
	if v.self < 0 {
		if piped {
			return nil, true, nil // taken before the create was applied: list again
		}
		return nil, false, d.vanished(w.ep)
	}
	if piped {
		fw.decided(v.holds, v.listed)
	}
	if v.holds {
		l, err := w.grantOn(ctx)
		if err != nil || l != nil {
			return l, false, err
		}
		// Suspended between the listing and the grant: wait for the
		// connection (the node keeps its place), then decide again.
		return nil, true, d.s.conns.awaitConnected(ctx)
	}
	fw.dropOwnRead()
	paths, err := c.watchPaths(d.adir, v.nodes, v.self, v.watch)
	if err != nil {
		return nil, false, err
	}
	me := v.nodes[v.self]
	if !w.block {
		return nil, false, c.locked(me.Name, paths)
	}
	if c.fromDir != nil {
		paths = append(paths, d.adir) // a change of the Rule's data wakes the waiter too
	}
	// Watch the nodes the Rule named, wake, list again.
	fw.dropChildSlot()
	w.gauge.start(d, me.Kind)
	l, err := w.sleep(ctx, paths, v.skip)
	return l, l == nil && err == nil, err
}

// sleep watches the nodes at paths until one is deleted or changes (or its
// watch is dropped), the own node goes (an early lease's end), ctx ends or
// the Session is closed. A deletion the re-list skip applies to (skip) may
// grant at once. It returns (nil, nil) when the loop must list again.
func (w *waiter) sleep(ctx context.Context, paths []string, skip bool) (*lease, error) {
	d, fw := w.d, w.fw
	wk, stop, err := d.s.watches.watchNodes(ctx, fw.prefetcher(w.t, skip), paths...)
	if err != nil {
		return nil, d.wrap("get", err)
	}
	select {
	case <-wk.ch: // deleted, changed, or no longer watched
		stop()
		if wk.err != nil {
			return nil, d.wrap("get", wk.err)
		}
		if skip && wk.deleted {
			return fw.grantOnSkip(ctx, w.ep, w.t)
		}
	case <-fw.ended():
		// The own node was deleted (or the early lease ended): the re-list
		// reports it (case C10).
		stop()
		fw.dropEarlyLease()
	case <-ctx.Done():
		stop()
		return nil, context.Cause(ctx)
	case <-d.s.quit:
		stop()
		return nil, recipe.ErrSessionClosed
	}
	return nil, nil
}

// decide asks the Rule about nodes[self]. A Rule that panics (a bug in the
// recipe: see Rule) is recipe.ErrBadOption wrapping the panic value, so that the
// caller gives its node up as after any other failed wait; the stack goes
// to the debug log.
func (c *ruleContract) decide(nodes []NodeName, self int) (holds bool, watch []int, err error) {
	defer func() {
		if v := recover(); v != nil {
			c.log.Debug("queue rule panicked", "dir", shortpath.Of(c.dir), "panic", v, "stack", string(debug.Stack()))
			if e, ok := v.(error); ok {
				err = fmt.Errorf("%w: the rule for %s panicked: %w", recipe.ErrBadOption, shortpath.Of(c.dir), e)
			} else {
				err = fmt.Errorf("%w: the rule for %s panicked: %v", recipe.ErrBadOption, shortpath.Of(c.dir), v)
			}
		}
	}()
	holds, watch = c.rule(nodes, self)
	return holds, watch, nil
}

// locked is TryAcquire's recipe.ErrLocked for the node name, which the Rule did
// not grant: it names the nodes whose deletion the caller would wait for
// (the Rule's watch list), which are not necessarily holders.
func (c *ruleContract) locked(name string, paths []string) error {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = path.Base(p)
	}
	return fmt.Errorf("%w: %s (%s not granted; it would wait for a change to %s)", recipe.ErrLocked, shortpath.Of(c.dir), name, strings.Join(names, ", "))
}

// watchPaths turns the Rule's watch indexes into paths below adir; a Rule
// that names none, or an invalid index, is recipe.ErrBadOption.
func (c *ruleContract) watchPaths(adir string, nodes []NodeName, self int, watch []int) ([]string, error) {
	paths := make([]string, 0, len(watch))
	for _, w := range watch {
		if w < 0 || w >= len(nodes) || w == self {
			return nil, fmt.Errorf("%w: the rule for %s named no valid node to watch (index %d of %d)", recipe.ErrBadOption, shortpath.Of(c.dir), w, len(nodes))
		}
		paths = append(paths, adir+"/"+nodes[w].Name)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: the rule for %s named no node to watch", recipe.ErrBadOption, shortpath.Of(c.dir))
	}
	return paths, nil
}

// list reads the directory's children, and the directory's version from
// the same reply's Stat: the pipelined listing if there is one, otherwise a
// getChildren, with a child watch for a waiter with an early lease
// (fastWait.relistSlot), or beside a read of the own node for a waiter
// without one (fastWait.readOwn). A missing directory lists as empty: the
// node went with it.
func (w *waiter) list(ctx context.Context) (_ []string, _ dirVersion, piped bool, _ error) {
	d, fw := w.d, w.fw
	if children, dv, ok := fw.piped(); ok {
		return children, dv, true, nil
	}
	if children, dv, ok := fw.fetched(ctx); ok {
		return children, dv, false, nil
	}
	slot := fw.relistSlot()
	defer fw.readOwn(ctx, w.t)()
	// children and dv are written by the call's reply, which may come
	// after an error return: read them only on success.
	var children []string
	var dv dirVersion
	err := d.s.req.retryOwn(ctx, &lostSends{size: d.reqSize}, func(ctx context.Context) (err error) {
		children, dv, err = d.s.childrenVersion(ctx, d.adir, slot != nil)
		return err
	})
	fw.listed(slot, err == nil)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, dirVersion{}, false, nil
	}
	if err != nil {
		return nil, dirVersion{}, false, d.wrap("children", err)
	}
	return children, dv, false, nil
}

// find parses and orders a listing (order, with its czxid cache) and
// returns the index of the node name in it (-1 when it is not listed).
// Another recipe's nodes in the listing are recipe.ErrMixedRecipes.
func (q *qdir) find(ctx context.Context, children []string, name string, czxids map[string]int64) ([]NodeName, int, error) {
	nodes, k, mixed := parseListing(children, q.kinds)
	if mixed {
		return nil, -1, q.mixed(k)
	}
	nodes, err := q.order(ctx, nodes, czxids)
	if err != nil {
		return nil, -1, err
	}
	return nodes, slices.IndexFunc(nodes, func(n NodeName) bool { return n.Name == name }), nil
}

// grantOn grants the node the Rule just granted: on the child watch of the
// listing when it stands in for the own-node watch, otherwise by reading
// the node. It returns (nil, nil) when the connection was suspended since
// the listing.
func (w *waiter) grantOn(ctx context.Context) (*lease, error) {
	fw := w.fw
	if l, ok, err := fw.grantOnChildWatch(w.ep); ok {
		return l, err
	}
	if l, st, err := fw.takeOwnRead(); l != nil {
		return w.d.grantRead(w.ep, l, st, err)
	}
	return w.d.grant(ctx, w.ep, w.t)
}

// grant reads the own node's Stat with a data watch and turns it into a
// lease. It returns (nil, nil) when the connection was suspended meanwhile.
func (q *qdir) grant(ctx context.Context, ep *epoch, t *Ticket) (*lease, error) {
	s := q.s
	l := s.leases.prepare(ctx, t.leaseNode())
	var st *zk.Stat
	err := s.req.retryOwn(ctx, &lostSends{size: q.reqSize}, func(ctx context.Context) (err error) {
		st, err = s.stat(ctx, t.path, true)
		return err
	})
	return q.grantRead(ep, l, st, err)
}

// grantRead grants the prepared lease l on the read (with a data watch,
// sent after l was registered) of its node: st, or the read's error. A
// node owned by another session is recipe.ErrSessionLost, a missing one the
// node's loss (vanished).
func (q *qdir) grantRead(ep *epoch, l *lease, st *zk.Stat, err error) (*lease, error) {
	if err == nil && st.EphemeralOwner != ep.id {
		err = fmt.Errorf("%w: own node belongs to session 0x%x, not 0x%x", recipe.ErrSessionLost, st.EphemeralOwner, ep.id)
	}
	if errors.Is(err, zk.ErrNoNode) {
		err = q.vanished(ep)
	}
	if err != nil {
		q.s.leases.drop(l)
		return nil, q.wrap("get", err)
	}
	return q.activate(ep, l, st)
}

// activate makes the registered lease l live (st: see activateLease) and
// turns a refusal into the wait's answer: the own node's loss, the
// session's end (ep's cause; recipe.ErrSessionClosed too, since Close ends the
// current epoch under the same lock that marks the Session closed), or
// (nil, nil) when the connection was suspended since the listing. It
// grants an early lease (its own-node watch is its child watch or was set
// by the caller) as well as a read one.
func (q *qdir) activate(ep *epoch, l *lease, st *zk.Stat) (*lease, error) {
	cause := q.s.leases.activate(l, ep, st)
	switch {
	case cause == nil:
		return l, nil
	case errors.Is(cause, recipe.ErrNodeDeleted):
		return nil, q.vanished(ep)
	case ep.ctx.Err() != nil:
		return nil, context.Cause(ep.ctx)
	}
	return nil, nil
}

// waitGauge reports a wait to recipe.Metrics.Waiting once, and its end.
type waitGauge struct {
	m         recipe.Metrics
	kind, dir string
}

func (g *waitGauge) start(d *qdir, kind string) {
	if m := d.s.cfg.metrics; m != nil && g.m == nil {
		g.m, g.kind, g.dir = m, metricKind(kind), d.dir
		m.Waiting(g.kind, g.dir, 1)
	}
}

func (g *waitGauge) end() {
	if g.m != nil {
		g.m.Waiting(g.kind, g.dir, -1)
	}
}
