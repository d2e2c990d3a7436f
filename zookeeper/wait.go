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

// wait is the engine's core loop, from a created node to a grant: list the
// directory, ask the Rule, grant or watch the nodes it names, wake, list
// again. The fast paths (fast.go) are called at named points and fall back
// to the plain step. With fs (an Acquire's) the first listing is the one
// pipelined behind the create. Without block (TryAcquire) a node the Rule
// does not grant is recipe.ErrLocked. See docs/design.md#acquisition.
func (q *Queue) wait(ctx context.Context, t *Ticket, block bool, fs *fastStart) (*lease, error) {
	ep := t.ep
	// Every wait also ends when the node's session is lost.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(ep.ctx, func() { cancel(context.Cause(ep.ctx)) })()
	fw := q.startFast(ctx, fs, block)
	defer fw.drop()
	var gauge waitGauge
	defer gauge.end()
	czxids := map[string]int64{} // at the sequence limit: see order
	for {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		// List.
		children, piped, err := q.list(ctx, t, fw)
		if err != nil {
			return nil, err
		}
		nodes, self, err := q.find(ctx, children, t.name, czxids)
		if err != nil {
			return nil, err
		}
		if self < 0 {
			if piped {
				continue // taken before the create was applied: list again
			}
			return nil, q.vanished(ep)
		}
		// Ask the Rule.
		holds, watch, err := q.decide(nodes, self)
		if err != nil {
			return nil, err
		}
		if piped {
			fw.decided(holds, len(nodes))
		}
		if holds {
			l, err := q.grantOn(ctx, ep, t, fw)
			if err != nil || l != nil {
				return l, err
			}
			// Suspended between the listing and the grant: wait for the
			// connection (the node keeps its place), then decide again.
			if err := q.s.conns.awaitConnected(ctx); err != nil {
				return nil, err
			}
			continue
		}
		fw.dropOwnRead()
		paths, err := q.watchPaths(nodes, self, watch)
		if err != nil {
			return nil, err
		}
		if !block {
			return nil, q.locked(nodes[self].Name, paths)
		}
		// Watch the nodes the Rule named, wake, list again.
		fw.dropChildSlot()
		gauge.start(q, nodes[self].Kind)
		if l, err := q.sleep(ctx, ep, t, fw, paths, fw.mayskip(nodes, self, watch)); err != nil || l != nil {
			return l, err
		}
	}
}

// sleep watches the nodes at paths until one is deleted or changes (or its
// watch is dropped), the own node goes (an early lease's end), ctx ends or
// the Session is closed. A deletion the re-list skip applies to (skip) may
// grant at once. It returns (nil, nil) when the loop must list again.
func (q *Queue) sleep(ctx context.Context, ep *epoch, t *Ticket, fw *fastWait, paths []string, skip bool) (*lease, error) {
	w, stop, err := q.s.watches.watchNodes(ctx, fw.prefetcher(t, skip), paths...)
	if err != nil {
		return nil, q.wrap("get", err)
	}
	select {
	case <-w.ch: // deleted, changed, or no longer watched
		stop()
		if skip && w.deleted {
			return fw.grantOnSkip(ctx, ep, t)
		}
	case <-fw.ended():
		// The own node was deleted (or the early lease ended): the re-list
		// reports it (case C10).
		stop()
		fw.dropEarlyLease()
	case <-ctx.Done():
		stop()
		return nil, context.Cause(ctx)
	case <-q.s.quit:
		stop()
		return nil, recipe.ErrSessionClosed
	}
	return nil, nil
}

// decide asks the Rule about nodes[self]. A Rule that panics (a bug in the
// recipe: see Rule) is recipe.ErrBadOption wrapping the panic value, so that the
// caller gives its node up as after any other failed wait; the stack goes
// to the debug log.
func (q *Queue) decide(nodes []NodeName, self int) (holds bool, watch []int, err error) {
	defer func() {
		if v := recover(); v != nil {
			q.s.log.Debug("queue rule panicked", "dir", shortpath.Of(q.dir), "panic", v, "stack", string(debug.Stack()))
			if e, ok := v.(error); ok {
				err = fmt.Errorf("%w: the rule for %s panicked: %w", recipe.ErrBadOption, shortpath.Of(q.dir), e)
			} else {
				err = fmt.Errorf("%w: the rule for %s panicked: %v", recipe.ErrBadOption, shortpath.Of(q.dir), v)
			}
		}
	}()
	holds, watch = q.rule(nodes, self)
	return holds, watch, nil
}

// locked is TryAcquire's recipe.ErrLocked for the node name, which the Rule did
// not grant: it names the nodes whose deletion the caller would wait for
// (the Rule's watch list), which are not necessarily holders.
func (q *Queue) locked(name string, paths []string) error {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = path.Base(p)
	}
	return fmt.Errorf("%w: %s (%s not granted; it would wait for a change to %s)", recipe.ErrLocked, shortpath.Of(q.dir), name, strings.Join(names, ", "))
}

// list reads the directory's children: the pipelined listing if there is
// one, otherwise a getChildren, with a child watch for a waiter with an
// early lease (fastWait.relistSlot), or beside a read of the own node for
// a waiter without one (fastWait.readOwn). A missing directory lists as
// empty: the node went with it.
func (q *Queue) list(ctx context.Context, t *Ticket, fw *fastWait) ([]string, bool, error) {
	if children, ok := fw.piped(); ok {
		return children, true, nil
	}
	if children, ok := fw.fetched(ctx); ok {
		return children, false, nil
	}
	slot := fw.relistSlot()
	defer fw.readOwn(ctx, t)()
	// children is written by the request's worker, which may outlive an
	// error return: read it only on success.
	var children []string
	err := q.s.req.retry(ctx, q.reqSize, func() (err error) {
		if slot != nil {
			children, _, _, err = q.s.conn.ChildrenW(q.adir)
		} else {
			children, _, err = q.s.conn.Children(q.adir)
		}
		return err
	})
	fw.listed(slot, err == nil)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, q.wrap("children", err)
	}
	return children, false, nil
}

// find parses and orders a listing (order, with its czxid cache) and
// returns the index of the node name in it (-1 when it is not listed).
// Another recipe's nodes in the listing are recipe.ErrMixedRecipes.
func (q *Queue) find(ctx context.Context, children []string, name string, czxids map[string]int64) ([]NodeName, int, error) {
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

// watchPaths turns the Rule's watch indexes into paths; a Rule that names
// none, or an invalid index, is recipe.ErrBadOption.
func (q *Queue) watchPaths(nodes []NodeName, self int, watch []int) ([]string, error) {
	paths := make([]string, 0, len(watch))
	for _, w := range watch {
		if w < 0 || w >= len(nodes) || w == self {
			return nil, fmt.Errorf("%w: the rule for %s named no valid node to watch (index %d of %d)", recipe.ErrBadOption, shortpath.Of(q.dir), w, len(nodes))
		}
		paths = append(paths, q.adir+"/"+nodes[w].Name)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: the rule for %s named no node to watch", recipe.ErrBadOption, shortpath.Of(q.dir))
	}
	return paths, nil
}

// grantOn grants the node the Rule just granted: on the child watch of the
// listing when it stands in for the own-node watch, otherwise by reading
// the node. It returns (nil, nil) when the connection was suspended since
// the listing.
func (q *Queue) grantOn(ctx context.Context, ep *epoch, t *Ticket, fw *fastWait) (*lease, error) {
	if l, ok, err := fw.grantOnChildWatch(ep); ok {
		return l, err
	}
	if l, st, err := fw.takeOwnRead(); l != nil {
		return q.grantRead(ep, l, st, err)
	}
	return q.grant(ctx, ep, t)
}

// grant reads the own node's Stat with a data watch and turns it into a
// lease. It returns (nil, nil) when the connection was suspended meanwhile.
func (q *Queue) grant(ctx context.Context, ep *epoch, t *Ticket) (*lease, error) {
	s := q.s
	l := s.leases.prepare(ctx, t.leaseNode())
	var st *zk.Stat
	err := s.req.retry(ctx, q.reqSize, func() (err error) {
		_, st, _, err = s.conn.GetW(t.path)
		return err
	})
	if err != nil {
		// st is written by the request's worker, which may outlive an
		// error return: read it only on success.
		return q.grantRead(ep, l, nil, err)
	}
	return q.grantRead(ep, l, st, nil)
}

// grantRead grants the prepared lease l on the read (with a data watch,
// sent after l was registered) of its node: st, or the read's error. A
// node owned by another session is recipe.ErrSessionLost, a missing one the
// node's loss (vanished).
func (q *Queue) grantRead(ep *epoch, l *lease, st *zk.Stat, err error) (*lease, error) {
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
func (q *Queue) activate(ep *epoch, l *lease, st *zk.Stat) (*lease, error) {
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

func (g *waitGauge) start(q *Queue, kind string) {
	if m := q.s.cfg.metrics; m != nil && g.m == nil {
		g.m, g.kind, g.dir = m, metricKind(kind), q.dir
		m.Waiting(g.kind, g.dir, 1)
	}
}

func (g *waitGauge) end() {
	if g.m != nil {
		g.m.Waiting(g.kind, g.dir, -1)
	}
}
