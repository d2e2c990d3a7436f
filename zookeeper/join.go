package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// join creates the caller's node and returns its Ticket. With fs (an
// Acquire's), the create goes out as create2 with the listing right behind
// it (see fast.go). A failed join leaves no node behind.
func (q *Queue) join(ctx context.Context, kind string, data []byte, anchor *anchorSpec, keep bool, fs *fastStart) (*Ticket, error) {
	if !slices.Contains(q.d.kinds, kind) {
		return nil, fmt.Errorf("%w: node kind %q is not one of %q", recipe.ErrBadOption, kind, q.d.kinds)
	}
	if err := q.d.checkCreate(kind, data, anchor); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	ep, err := q.d.s.conns.current()
	if err != nil {
		return nil, err
	}
	guid := newGUID()
	pipe := fs.pipe()
	name, maybe, err := q.d.create(ctx, guid, kind, data, anchor, pipe)
	reply, usable := pipe.finish(name, err)
	if err != nil {
		if maybe {
			// The create may have been applied: remove whatever carries our GUID.
			q.d.deleteOwned(ctx, cleanupItem{dir: q.d.adir, guid: guid, owner: q.d.s.ID(), sends: lostSends{size: q.d.reqSize}}, false)
		}
		if isConnErr(err) && ep.ctx.Err() != nil && !errors.Is(err, recipe.ErrSessionLost) {
			// The connection failed because the session it served is
			// lost (expired, or presumed expired at its deadline): say so,
			// so that a caller can join again on the next session.
			err = errorf("%w (%w)", context.Cause(ep.ctx), err)
		}
		return nil, err
	}
	if n, ok := parseNodeName(name, q.d.kinds); ok {
		q.d.noteSeq(kind, n.Seq)
	}
	t := &Ticket{q: q, name: name, path: q.d.adir + "/" + name, ep: ep, owner: ep.id, keep: keep, rep: q.reps[kind]}
	if anchor != nil {
		t.token = anchor.token
	}
	// Which session owns the node? The create was sent after ep was current;
	// if ep is still current and not lost, ep's session created it (a new
	// session is reported before any request is sent on its connection).
	cur, err := q.d.s.conns.current()
	if err != nil {
		return nil, err // closed: the node went with the session
	}
	if cur != ep || ep.ctx.Err() != nil {
		fs.discard()
		if err := t.adopt(ctx, cur); err != nil {
			return nil, err
		}
		return t, nil
	}
	if usable && reply.EphemeralOwner == ep.id {
		// The early lease (fast.go's create2 token): t's lease prepared
		// from the server's Stat of the node just created (owned by the
		// current session), registered before any watch on its node is set.
		fs.pre = q.d.s.leases.registerEarly(ctx, t.leaseNode(), reply, fs.child)
	} else {
		fs.dropChildSlot()
	}
	return t, nil
}
