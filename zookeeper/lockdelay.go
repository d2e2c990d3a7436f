package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/lockname"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/internal/zkname"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The lock-delay of an exclusive queue (mutex.WithLockDelay; see
// recipe.LockDelayServed and docs/lock-delay.md#lock-delay-on-zookeeper). A
// persistent marker znode beside the queue nodes, markerName, names the
// node whose grant was handed out last:
//
//   - a grant writes its own node's name into the marker (a create, or a
//     multi deleting the marker at the version read and creating it anew)
//     before Acquire returns it;
//   - Release deletes its node and the marker in one multi: a clean end
//     leaves no marker, atomically;
//   - every other end (session expired or closed, node deleted by someone
//     else, a Release whose multi failed) leaves the marker naming a node
//     that is gone. The next contender granted by the rule stamps it:
//     it replaces it by "gone:<name>" (the same delete+create multi),
//     whose Ctime is the leader's clock then, the delay's start. Every
//     contender, in any process, learns the server's "now" from the Mtime
//     a conditional Set of the stamped marker (same data) returns, and
//     serves d - (now - start), so a new process does not restart it.
//
// A failure anywhere only leaves a marker naming a gone node, which costs
// at most one delay; nothing but the holder's own multi removes a marker,
// and it succeeds only while the holder's node exists.

// markerName ("_lock-delay") is the name of the lock-delay marker, a
// persistent child of a lock directory that a lock with a lock-delay keeps
// beside its queue nodes. It is outside the node-name grammar: every
// listing ignores it; and reserved: a recipe path with a segment of that
// name is refused (ErrReservedName), as a lock there would be taken for
// the marker. It exists from a grant of such a lock until that holder's
// Release, and after an unclean end until the next such holder's Release.
const markerName = zkname.MarkerName

// markerPath returns the path of the marker of the lock directory adir
// (absolute): the one place its name is made (its name is reserved:
// fixedNames).
func markerPath(adir string) string { return adir + "/" + markerName }

// goneMark prefixes the data of a stamped marker: "gone:<name>" names the
// gone node as the plain marker did, and its Ctime is the delay's start.
// Like any data but the contender's own name, it is an unclean end.
const goneMark = "gone:"

// errReread asks serve to read the marker again (it was just
// stamped: its Ctime is needed).
var errReread = errors.New("zookeeper: lock-delay marker stamped: read it again")

// lockDelay is a Queue's lock-delay: its length, and its Sight of the
// gone holder (grant.Sight): the local clock's start of the delay, used
// where the server's is out of reach (a marker this Session may not read
// or write), and as a bound for a contender that watched the loss.
type lockDelay struct {
	d    time.Duration
	q    *qdir       // the lock's directory, where the marker is
	seen grant.Sight // keyed by sightKey
}

// sightKey names what a marker records, for the Sight: the gone node's
// name (the same before and after the stamp), or for a marker this Session
// may not read (data nil), the marker znode itself (its czxid).
func sightKey(data []byte, st *zk.Stat) string {
	if data == nil {
		return "\x00czxid:" + strconv.FormatInt(st.Czxid, 10)
	}
	return strings.TrimPrefix(string(data), goneMark)
}

// setLockDelay turns the lock-delay on (zkside.Queue.SetLockDelay): only
// for a queue of an exclusive Rule, before its first use.
func (q *Queue) setLockDelay(d time.Duration) {
	q.delay = nil
	if d > 0 {
		q.delay = &lockDelay{d: d, q: &q.d}
	}
}

// rejoin reports whether an acquisition whose grant failed with err joins
// again: a wait (not TryAcquire) whose grant a suspension ended while it
// served the delay, before it was handed out, while ctx is live. Never
// without a lock-delay (ld nil).
func (ld *lockDelay) rejoin(ctx context.Context, wait bool, err error) bool {
	return ld != nil && wait && errors.Is(err, recipe.ErrSuspended) && ctx.Err() == nil
}

// marker is what a lease granted under a lock-delay wrote: the marker's
// path. Every write creates it anew, so its version is 0 until someone
// else writes to it (then the Release's multi fails: the marker stays).
// Contenders Set only a stamped marker, never one naming a holder.
type marker struct {
	path string // absolute
}

// hold is the lock-delay's step of an acquisition, between the Rule's
// grant of l (t's node) and Acquire's return: it serves what remains of the
// delay through w if the marker names another node (without wait, that is
// w.Refuse: recipe.ErrLocked), then writes t's name into the marker and
// records what the Acquire waited (SetDelayServed of w.Served(): w is the
// Acquire's, so that it adds this wait to those of its earlier grants that
// a suspension ended before they were handed out). It stops when l ends
// (its session or node is lost). On error the caller gives l and the node
// up, as after a wait that failed, leaving the marker as it was or stamped.
func (ld *lockDelay) hold(ctx context.Context, t *Ticket, l *lease, wait bool, w *grant.Serving) error {
	q := ld.q
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) })()
	mpath := markerPath(q.adir)
	for {
		data, st, err := ld.readMarker(ctx, mpath)
		if err != nil {
			return err
		}
		if st != nil && string(data) != t.name {
			var left time.Duration
			left, st, err = ld.delayLeft(ctx, mpath, data, st)
			if markerChanged(err) {
				continue // stamped, or changed since the read: decide again
			}
			if err != nil {
				return err
			}
			if left > 0 && !wait {
				gone := ""
				if data != nil {
					gone = lockname.Quote(sightKey(data, st))
				}
				return w.Refuse(gone, left)
			}
			// What this contender waited (recipe.LockDelayServed has that
			// meaning on every backend): the rest it found, not the part
			// an earlier contender served before it gave up.
			if err = w.Wait(ctx, left); err != nil {
				return err
			}
		}
		err = ld.writeMarker(ctx, mpath, data, st, t.name)
		if markerChanged(err) {
			continue // changed since the read: decide again
		}
		if err != nil {
			return err
		}
		l.marker = &marker{path: mpath} // before l is handed out: Release reads it
		l.SetDelayServed(w.Served())
		return nil
	}
}

// delayLeft returns what remains of the delay for the marker (data, st)
// naming a gone node, and the marker's state after it (the version the
// grant's writeMarker replaces). A plain marker is stamped first (errReread:
// read it back). For a stamped one, a Set at the version read tells the
// server's now: the rest is d - (Mtime - Ctime), in [0, d], and at most
// what the local clock says (a contender that saw the loss itself). The
// two times are the leader's clock at each write: across a leader change
// they are two servers' clocks, off by their skew. Unreadable marker, or a
// Set refused by its ACL (stamped under another identity): the local clock.
func (ld *lockDelay) delayLeft(ctx context.Context, mpath string, data []byte, st *zk.Stat) (time.Duration, *zk.Stat, error) {
	q := ld.q
	if data == nil {
		return ld.seen.Left(sightKey(data, st), ld.d), st, nil
	}
	name, stamped := strings.CutPrefix(string(data), goneMark)
	local := ld.seen.Left(name, ld.d)
	if !stamped {
		err := ld.writeMarker(ctx, mpath, data, st, goneMark+name)
		if err == nil {
			err = errReread
		}
		return 0, nil, err
	}
	// now is written by the request's worker, which may outlive an error
	// return: read it only on success.
	var now *zk.Stat
	err := q.s.req.retry(ctx, 2*q.reqSize, func() (err error) {
		now, err = q.s.conn.Set(mpath, data, st.Version)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoAuth):
		return local, st, nil
	case markerChanged(err):
		return 0, nil, err
	case err != nil:
		return 0, nil, q.wrap("set", err)
	}
	// Whole milliseconds: the true elapsed time may be up to 1 ms less.
	elapsed := time.Duration(now.Mtime-now.Ctime-1) * time.Millisecond
	return min(grant.Rest(ld.d, elapsed), local), now, nil
}

// readMarker reads the marker (st nil: there is none; data nil: unreadable
// under its ACL, taken for another node's name).
func (ld *lockDelay) readMarker(ctx context.Context, mpath string) ([]byte, *zk.Stat, error) {
	q := ld.q
	// data and st are written by the request's worker, which may outlive
	// an error return: read them only on success.
	var (
		data []byte
		st   *zk.Stat
	)
	err := q.s.req.retry(ctx, 2*q.reqSize, func() (err error) {
		data, st, err = q.s.conn.Get(mpath)
		if errors.Is(err, zk.ErrNoAuth) {
			// Made by a Session whose ACL keeps it from this one: its
			// presence is what counts (exists needs no permission).
			var ok bool
			ok, st, err = q.s.conn.Exists(mpath)
			if data = nil; !ok {
				st = nil
			}
		}
		if errors.Is(err, zk.ErrNoNode) {
			data, st, err = nil, nil, nil
		}
		return err
	})
	if err != nil {
		return nil, nil, q.wrap("get", err)
	}
	return data, st, nil
}

// writeMarker names name in the marker read as (data, st): a create when
// there was none, else a multi that deletes it at the version read and
// creates it anew (so a lock needs no WRITE on a marker another Session
// made: CREATE and DELETE on the directory, as for its nodes). Nothing is
// sent when it names name already (a retry after a lost reply).
// NodeExists, BadVersion and NoNode mean the marker changed since the read.
func (ld *lockDelay) writeMarker(ctx context.Context, mpath string, data []byte, st *zk.Stat, name string) error {
	q := ld.q
	if st != nil && string(data) == name {
		return nil
	}
	err := q.s.req.retry(ctx, 2*q.reqSize, func() error {
		if st == nil {
			_, err := q.s.conn.Create(mpath, []byte(name), 0, q.s.cfg.acl)
			return err
		}
		_, err := q.s.conn.Multi(&zk.DeleteRequest{Path: mpath, Version: st.Version},
			&zk.CreateRequest{Path: mpath, Data: []byte(name), Acl: q.s.cfg.acl})
		return err
	})
	if errors.Is(err, zk.ErrNotEmpty) {
		// No lock makes children there: someone planted one, and the
		// marker can be neither replaced nor removed until it is gone.
		return fmt.Errorf("%w: %s has children, which no lock makes: delete them (the lock-delay's record cannot be written)",
			recipe.ErrMixedRecipes, shortpath.Of(mpath))
	}
	if err != nil && !markerChanged(err) {
		return q.wrap("create", err)
	}
	return err
}

// markerChanged reports whether a write of the marker failed because the
// marker changed since it was read (or was stamped: errReread).
func markerChanged(err error) bool {
	return errors.Is(err, errReread) || errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode)
}

// removeWithMarker is Release's delete for a lease that wrote the marker:
// its node (at the version read for the grant) and the marker (at version
// 0, as it created it) in one multi, so the record of a clean end and the end
// are one step. It reports done when the node is gone. Any other outcome
// (the node was written to, the marker changed, the connection did not
// come back in time) leaves the marker, at worst one delay for the next
// holder, and Release falls back to the plain delete of the node.
func (l *lease) removeWithMarker(ctx context.Context, m *marker) (done bool) {
	r := l.reg
	cl := r.cleaner
	tctx, end := cl.deleteContext(ctx, l.owner, true)
	defer end()
	var failed error // the multi's own failure, not the connection's
	gone := false
	err := cl.req.retry(tctx, len(l.path)+len(m.path)+2*pathSlack, func() (err error) {
		r.mu.Lock()
		cur := r.conns.idLocked()
		r.mu.Unlock()
		if cur != l.owner {
			gone = true // the session is gone, and its node with it
			return nil
		}
		_, err = cl.conn.Multi(&zk.DeleteRequest{Path: l.path, Version: l.version},
			&zk.DeleteRequest{Path: m.path, Version: 0})
		if isConnErr(err) {
			return err
		}
		failed = err
		return nil
	})
	switch {
	case err != nil:
		return false
	case gone, failed == nil:
		return true
	}
	// go-zookeeper does not say which op failed: the node may be gone (this
	// multi's lost reply, its session, someone else: the marker is then
	// not this Release's to clear) or changed, or the marker changed.
	// Release's plain delete settles the node; the marker stays.
	cl.log.Debug("lock-delay marker left: the release's multi failed", "node", path.Base(l.path), "marker", shortpath.Of(m.path), "err", failed)
	return false
}
