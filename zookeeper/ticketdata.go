package zookeeper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// errWrittenBy is the settle's verdict on a node written by someone else.
var errWrittenBy = errors.New("written by someone else")

// SetData writes data to the ticket's node if its data version is still
// version, and returns the new version (a group member's Update). After a
// lost reply the node is read before anything is sent again: at version+1
// with data it was this write (or one of the same bytes), at version it is
// sent again, else someone else wrote it. Errors: recipe.ErrConflict
// (nothing written); the ticket's Err, or recipe.ErrNodeDeleted for a node
// gone; recipe.ErrTooLarge; *recipe.OpError; ctx's cause (nothing is sent
// on a ctx done already; after a send the write may have applied: SetData
// again with the same version and data settles it).
func (t *Ticket) SetData(ctx context.Context, data []byte, version int32) (int32, error) {
	return nodeRef{q: t.q, name: t.name, path: t.path, owner: t.owner, err: t.Err}.setData(ctx, data, version)
}

// SetLeaseData writes data to the node of l, a live grant of this queue
// (an election leader's Proclaim), with SetData's handling of a lost reply,
// at the node's current data version (the node is the lease's: only its
// holder writes it); readers (Head, ObserveHead) see the new data. Errors:
// recipe.ErrLeaseLost (wrapping the cause) as soon as the lease ends;
// recipe.ErrBadOption for a lease not of this queue's; else as SetData.
func (q *Queue) SetLeaseData(ctx context.Context, l recipe.Lease, data []byte) error {
	ls, ok := l.(*lease)
	dir := q.d.adir + "/"
	if !ok || ls == nil || ls.reg != &q.d.s.leases || !strings.HasPrefix(ls.path, dir) || strings.Contains(ls.path[len(dir):], "/") {
		return fmt.Errorf("%w: not a lease of the queue %s", recipe.ErrBadOption, q.d.dir)
	}
	live := func() error {
		if !ls.Live() {
			return fmt.Errorf("%w (%w)", recipe.ErrLeaseLost, context.Cause(ls.Context()))
		}
		return nil
	}
	// The lease's end ends the write (a partition would otherwise hold it
	// until the connection is back): its error is then the lease's.
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(ls.Context(), func() { cancel(live()) })
	defer stop()
	ctx = wctx
	ls.reg.mu.Lock()
	version, czxid := ls.version, ls.czxid
	ls.reg.mu.unlock()
	ref := nodeRef{q: q, name: ls.path[len(dir):], path: ls.path, owner: ls.owner, err: live}
	v, err := ref.setData(ctx, data, version)
	if errors.Is(err, recipe.ErrConflict) {
		// The version known may predate this lease's own earlier write
		// (one whose ctx ended after the send): the node is the lease's
		// while its owner and czxid are, so write at its current version.
		if st, serr := q.d.s.stat(ctx, ls.path, false); serr == nil && st.EphemeralOwner == ls.owner && st.Czxid == czxid && st.Version != version {
			v, err = ref.setData(ctx, data, st.Version)
		}
	}
	if err == nil {
		ls.reg.mu.Lock()
		ls.version = max(ls.version, v) // Release deletes by it; the own-node watch reads it too
		ls.reg.mu.unlock()
	} else if lerr := live(); lerr != nil {
		err = lerr // the lease ended meanwhile: that is why
	}
	return err
}

// nodeRef is a queue node of this Session's that a caller writes: a
// Ticket's or a lease's, with why it can no longer be written (err).
type nodeRef struct {
	q          *Queue
	name, path string // child name; absolute path
	owner      int64
	err        func() error
}

func (t nodeRef) setData(ctx context.Context, data []byte, version int32) (int32, error) {
	if err := t.q.CheckNodeData(data); err != nil {
		return 0, err
	}
	if err := t.err(); err != nil {
		return 0, err
	}
	if ctx.Err() != nil { // nothing sent: requests.retry sends a first attempt even then
		return 0, context.Cause(ctx)
	}
	s := t.q.d.s
	var st *zk.Stat
	unknown := false
	err := s.req.retry(ctx, t.q.d.reqSize+len(data), func() (err error) {
		if unknown {
			applied, again, err := t.settle(data, version)
			if err != nil || applied {
				st = &zk.Stat{Version: version + 1}
				return err
			}
			unknown = !again
		}
		st, err = s.conn.Set(t.path, data, version)
		if isConnErr(err) && !errors.Is(err, zk.ErrNoServer) {
			unknown = true
		}
		if errors.Is(err, zk.ErrBadVersion) {
			// Already at version+1 with data (an earlier call's write whose
			// outcome its caller did not learn): the node is as this write
			// would leave it.
			if applied, _, serr := t.settle(data, version); serr == nil && applied {
				st = &zk.Stat{Version: version + 1}
				return nil
			}
		}
		return err
	})
	switch {
	case err == nil:
		return st.Version, nil
	case errors.Is(err, zk.ErrBadVersion), errors.Is(err, errWrittenBy):
		return 0, &recipe.OpError{Op: "set", Path: t.q.d.dir + "/" + t.name, Err: fmt.Errorf("%w: data version is not %d", recipe.ErrConflict, version)}
	case errors.Is(err, zk.ErrNoNode):
		if derr := t.err(); derr != nil {
			return 0, derr
		}
		return 0, recipe.ErrNodeDeleted
	}
	return 0, t.q.d.wrap("set", err)
}

// settle reads the node after a lost reply of a set of data at version:
// applied when it is at version+1 with data; again when it is still at
// version (send the set again); errWrittenBy otherwise, zk.ErrNoNode when
// the node is gone or not the caller's.
func (t nodeRef) settle(data []byte, version int32) (applied, again bool, _ error) {
	s := t.q.d.s
	if _, err := s.conn.Sync(t.path); err != nil {
		return false, false, err
	}
	cur, st, err := s.conn.Get(t.path)
	switch {
	case err != nil:
		return false, false, err
	case st.EphemeralOwner != t.owner:
		return false, false, zk.ErrNoNode
	case st.Version == version:
		return false, true, nil
	case st.Version == version+1 && bytes.Equal(cur, data):
		return true, false, nil
	}
	return false, false, errWrittenBy
}
