package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// join creates the caller's node and returns its Ticket. With fs (an
// Acquire's), the create goes out as create2 with the listing right behind
// it (see fast.go). A failed join leaves no node behind.
func (q *Queue) join(ctx context.Context, kind string, data []byte, anchor *anchorSpec, keep bool, fs *fastStart) (*Ticket, error) {
	if !slices.Contains(q.kinds, kind) {
		return nil, fmt.Errorf("%w: node kind %q is not one of %q", recipe.ErrBadOption, kind, q.kinds)
	}
	if err := q.checkCreate(kind, data, anchor); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	ep, err := q.s.conns.current()
	if err != nil {
		return nil, err
	}
	guid := newGUID()
	pipe := fs.pipe(guid, kind)
	name, maybe, err := q.create(ctx, guid, kind, data, anchor)
	reply, usable := pipe.finish(name, err)
	if err != nil {
		if maybe {
			// The create may have been applied: remove whatever carries our GUID.
			q.deleteOwned(ctx, cleanupItem{dir: q.adir, guid: guid, owner: q.s.ID(), sends: lostSends{size: q.reqSize}}, false)
		}
		if isConnErr(err) && ep.ctx.Err() != nil && !errors.Is(err, recipe.ErrSessionLost) {
			// The connection failed because the session it served is
			// lost (expired, or presumed expired at its deadline): say so,
			// so that a caller can join again on the next session.
			err = errorf("%w (%w)", context.Cause(ep.ctx), err)
		}
		return nil, err
	}
	if n, ok := parseNodeName(name, q.kinds); ok {
		q.noteSeq(kind, n.Seq)
	}
	t := &Ticket{q: q, name: name, path: q.adir + "/" + name, ep: ep, owner: ep.id, keep: keep, rep: q.reps[kind]}
	if anchor != nil {
		t.token = anchor.token
	}
	// Which session owns the node? The create was sent after ep was current;
	// if ep is still current and not lost, ep's session created it (a new
	// session is reported before any request is sent on its connection).
	cur, err := q.s.conns.current()
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
		fs.earlyLease(ctx, t, reply)
	} else {
		fs.dropChildSlot()
	}
	return t, nil
}

// adopt moves t to the session cur after its create was sent under an
// earlier one: the node must exist and belong to cur, or t is abandoned.
// The check is retried across connection losses (the new session's
// connection may still be coming up when a thawed process gets here): a
// connection error is not an answer.
func (t *Ticket) adopt(ctx context.Context, cur *epoch) error {
	s := t.q.s
	t.ep, t.owner = cur, cur.id
	var ok bool
	var st *zk.Stat
	err := s.req.retry(ctx, t.q.reqSize, func() (err error) {
		ok, st, err = s.conn.Exists(t.path)
		return err
	})
	if err == nil && (!ok || st.EphemeralOwner != cur.id) {
		err = fmt.Errorf("%w: node created under a session that is gone", recipe.ErrSessionLost)
	}
	if err != nil {
		t.abandon(ctx)
		return t.q.wrap("create", err)
	}
	return nil
}
