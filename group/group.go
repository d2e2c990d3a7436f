package group

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/member"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Kind is the node kind of member znodes ("_c_<guid>-member-<sequence>").
const Kind = "member-"

// Option configures New.
type Option func(*Group)

// WithLogger sets the logger of the group's members (re-registrations and
// their retries) and watches (default: the Session's logger,
// zookeeper.WithLogger).
func WithLogger(l *slog.Logger) Option {
	return func(g *Group) {
		if l != nil {
			g.log = l
		}
	}
}

// Group is a group of members in one ZooKeeper directory (see the package
// doc). All methods are safe for concurrent use.
type Group struct {
	q   *zookeeper.Queue
	dir string
	log *slog.Logger
}

var _ recipe.Group = (*Group)(nil)

// New returns the group in directory dir on session s. It performs no
// ZooKeeper operation. Errors: a *zookeeper.PathError (matching
// recipe.ErrInvalidPath) for a directory the recipes refuse (package
// zookeeper, "Paths"); recipe.ErrBadOption for a nil s.
func New(s *zookeeper.Session, dir string, opts ...Option) (*Group, error) {
	q, err := zookeeper.NewQueue(s, dir, []string{Kind}, allHold)
	if err != nil {
		return nil, err
	}
	g := &Group{q: q, dir: dir, log: zkside.SessionOf(s).Logger()}
	for _, o := range opts {
		if o != nil {
			o(g)
		}
	}
	g.log = g.log.With("dir", dir)
	return g, nil
}

// allHold is the group's Rule: every node holds at once (a member's
// registration is the lease of its node).
func allHold([]zookeeper.NodeName, int) (bool, []int) { return true, nil }

// Path returns the group's directory (relative to the session's chroot).
func (g *Group) Path() string { return g.dir }

// Join registers the caller as member id carrying data and returns once
// its node exists (recipe.Group.Join): an ephemeral sequential znode with a
// protected name, carrying id, a newline and data, made again after a
// session loss. An id belongs to its oldest live node: a Join whose node is
// not the oldest with its id deletes it and returns ErrMemberExists.
// ZooKeeper operations: Queue.Join, getChildren and getData per member (the
// id check), and the grant's (docs/design.md#acquisition). Errors:
// recipe.ErrMemberExists; recipe.CheckMemberID's; recipe.ErrTooLarge for
// data over the packet limit (Queue.CheckNodeData); as Queue.Join. None
// leaves a node behind.
func (g *Group) Join(ctx context.Context, id string, data []byte) (recipe.Member, error) {
	if err := recipe.CheckMemberID(id); err != nil {
		return nil, err
	}
	if err := g.q.CheckNodeData(encode(id, data)); err != nil {
		return nil, err
	}
	m, err := member.Join(ctx, id, data, &registrar{g: g, id: id}, g.log)
	if err != nil {
		return nil, err // not a nil *member.Member in a non-nil interface
	}
	return m, nil
}

// Members returns the group as the server held it at one point of its order
// (Queue.Snapshot; View.Rev is its zxid), sorted by id, one entry per id
// (its oldest node). Nodes of the member kind whose data is not a member's
// (no id line) and foreign children are left out. Errors: as
// Queue.Snapshot.
func (g *Group) Members(ctx context.Context) (recipe.View, error) {
	s, err := g.q.Snapshot(ctx)
	if err != nil {
		return recipe.View{}, err
	}
	return view(s), nil
}

// Watch delivers the group at once and after every change
// (recipe.Group.Watch), from Queue.ObserveSnapshots: a child watch on the
// directory and a data watch on every member's node, each a single server
// watch however many watchers the Session has.
func (g *Group) Watch(ctx context.Context) <-chan recipe.View {
	if ctx == nil {
		ctx = context.Background()
	}
	return relay(ctx, g.q.ObserveSnapshots(ctx))
}

// relay converts snapshots to views, coalescing as ObserveSnapshots does:
// a view not taken yet is replaced by a newer one.
func relay(ctx context.Context, in <-chan zookeeper.Snapshot) <-chan recipe.View {
	out := make(chan recipe.View)
	go func() {
		defer close(out)
		var next recipe.View
		have := false
		for {
			var send chan<- recipe.View
			if have {
				send = out
			}
			select {
			case s, ok := <-in:
				if !ok {
					return
				}
				next, have = view(s), true
			case send <- next:
				have = false
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// view is the group as snapshot s shows it.
func view(s zookeeper.Snapshot) recipe.View {
	v := recipe.View{Rev: s.Rev}
	seen := make(map[string]bool, len(s.Nodes))
	for _, n := range s.Nodes { // queue order: the oldest node of an id first
		id, data, ok := decode(n.Data)
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		v.Members = append(v.Members, recipe.MemberInfo{ID: id, Data: data, Since: int64(n.Token)})
	}
	slices.SortFunc(v.Members, func(a, b recipe.MemberInfo) int { return strings.Compare(a.ID, b.ID) })
	return v
}

// encode is a member node's data: id, a newline, data.
func encode(id string, data []byte) []byte {
	b := make([]byte, 0, len(id)+1+len(data))
	b = append(b, id...)
	b = append(b, '\n')
	return append(b, data...)
}

// decode splits a member node's data; ok is false for data no member wrote.
func decode(b []byte) (id string, data []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 || recipe.CheckMemberID(string(b[:i])) != nil {
		return "", nil, false
	}
	return string(b[:i]), b[i+1:], true
}
