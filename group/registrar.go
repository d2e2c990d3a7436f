package group

import (
	"context"
	"errors"
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
	pending []byte            // a write of t's node whose outcome is unknown, settled by the next Update
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
	r.t, r.version, r.pending = t, 0, nil
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

// Update writes data on the current node, checked against its version. A
// write whose outcome the caller did not learn (its ctx ended after the
// send) is settled first: sent again with the same version and data, it
// finds itself applied, or applies now.
func (r *registrar) Update(ctx context.Context, _ recipe.Lease, data []byte) error {
	if r.pending != nil {
		v, err := r.t.SetData(ctx, r.pending, r.version)
		if err != nil && !errors.Is(err, recipe.ErrConflict) {
			return err
		}
		r.pending = nil
		if err != nil {
			return err
		}
		r.version = v
	}
	enc := encode(r.id, data)
	v, err := r.t.SetData(ctx, enc, r.version)
	switch {
	case err == nil:
		r.version = v
	case ctx.Err() != nil || !errors.Is(err, recipe.ErrConflict) && !errors.Is(err, recipe.ErrTooLarge) && r.t.Err() == nil:
		r.pending = enc // may have applied
	}
	return err
}

// Remove deletes the current node, if any is left.
func (r *registrar) Remove(ctx context.Context) error {
	if r.t == nil {
		return nil
	}
	return r.t.Leave(ctx)
}
