package group

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// registrar is one member's node (member.Registrar). Its fields are used
// by one call at a time: the member serializes Register, Update and Remove.
type registrar struct {
	g       *Group
	id      string
	t       *zookeeper.Ticket // the current node, nil before the first
	version int32             // its data version as this member last wrote it
}

// Register grants the current node again while it lives (a suspension
// healed in the same ZooKeeper session), else joins with a new node.
func (r *registrar) Register(ctx context.Context, data []byte) (recipe.Lease, error) {
	if r.t != nil && r.t.Err() == nil {
		l, err := r.t.Await(ctx)
		if err == nil || r.t.Err() == nil {
			return l, err
		}
	}
	t, err := r.g.q.Join(ctx, Kind, encode(r.id, data))
	if err != nil {
		return nil, err
	}
	l, err := r.take(ctx, t)
	if err != nil {
		_ = t.Leave(context.Background())
		return nil, err
	}
	r.t, r.version = t, 0
	return l, nil
}

// take checks that t's node is the oldest with r's id, and grants it.
func (r *registrar) take(ctx context.Context, t *zookeeper.Ticket) (recipe.Lease, error) {
	ps, err := r.g.q.Participants(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.Name == t.Name() {
			break
		}
		if id, _, ok := decode(p.Data); ok && id == r.id {
			return nil, fmt.Errorf("%w: %q in %s (node %s, session 0x%x)", recipe.ErrMemberExists, r.id, r.g.dir, p.Name, p.SessionID)
		}
	}
	return t.Await(ctx)
}

// Update writes data on the current node, checked against its version.
func (r *registrar) Update(ctx context.Context, _ recipe.Lease, data []byte) error {
	v, err := r.t.SetData(ctx, encode(r.id, data), r.version)
	if err != nil {
		return err
	}
	r.version = v
	return nil
}

// Remove deletes the current node, if any is left.
func (r *registrar) Remove(ctx context.Context) error {
	if r.t == nil {
		return nil
	}
	return r.t.Leave(ctx)
}
