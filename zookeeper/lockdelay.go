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

// errReread asks exchange to read the marker again: it was just stamped
// (its Ctime is needed), or it changed since the read.
var errReread = errors.New("zookeeper: lock-delay marker stamped or changed: read it again")

// lockDelay is a Queue's lock-delay: its length, and its Sight of the
// gone holder (grant.Sight): the local clock's start of the delay, used
// where the server's is out of reach (a marker this Session may not read
// or write), and as a bound for a contender that watched the loss.
type lockDelay struct {
	d    time.Duration
	q    *qdir       // the lock's directory, where the marker is
	seen grant.Sight // keyed by the gone node's name, or "\x00czxid:"+the unreadable marker's czxid
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
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) })()
	var served *zk.Stat // the marker's state whose rest was waited out
	for {
		f, err := ld.exchange(ctx, t.name, served)
		if err != nil {
			return err
		}
		if f.left > 0 && !wait {
			gone := ""
			if f.gone != "" {
				gone = lockname.Quote(f.gone)
			}
			return w.Refuse(gone, f.left)
		}
		if f.left <= 0 { // the marker names t's node
			l.marker = &marker{path: markerPath(ld.q.adir)} // before l is handed out: Release reads it
			l.SetDelayServed(w.Served())
			return nil
		}
		// What this contender waited (recipe.LockDelayServed has that
		// meaning on every backend): the rest it found, not the part an
		// earlier contender served before it gave up.
		if err = w.Wait(ctx, f.left); err != nil {
			return err
		}
		served = f.at
	}
}

// found is what exchange found: the rest of the delay to serve (0: the
// marker names the contender now), the marker's state then, and the gone
// node's name ("" for a marker this Session may not read).
type found struct {
	left time.Duration
	at   *zk.Stat
	gone string
}

// exchange is the one route of the marker's requests, for the contender
// name (see settle for the step an attempt takes): one attempt, retried
// across connection losses, and made again while the marker changed
// under it (errReread). Each attempt decides from a fresh read, so an
// attempt again after a lost reply repeats nothing.
func (ld *lockDelay) exchange(ctx context.Context, name string, served *zk.Stat) (found, error) {
	q := ld.q
	for {
		// f is written by the request's worker, which may outlive an error
		// return: read it only on success.
		var f found
		err := q.s.req.retry(ctx, 2*q.reqSize, func() (err error) {
			f, err = ld.settle(name, served)
			return err
		})
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, errReread) {
			return found{}, err
		}
	}
}

// settle reads the marker and takes the step that what it found calls
// for, for the contender name:
//
//   - none, its own name already, or served (the state whose rest the
//     contender waited out, read again unchanged: same czxid and mzxid):
//     it writes name;
//   - unreadable under its ACL: the rest is the local clock's, from the
//     first sight of that marker (its czxid);
//   - a plain name: it stamps it (errReread: read it back for its Ctime);
//   - stamped: a Set at the version read tells the server's now: the rest
//     is Rest(d, Mtime - Ctime), at most the local clock's (a contender
//     that saw the loss itself). The two times are the leader's clock at
//     each write: across a leader change they are two servers' clocks, off
//     by their skew. A Set refused by its ACL (stamped under another
//     identity): the local clock.
//
// Nothing left to serve, it writes name at the state found (after the Set).
func (ld *lockDelay) settle(name string, served *zk.Stat) (found, error) {
	q := ld.q
	mpath := markerPath(q.adir)
	data, st, err := ld.read(mpath)
	switch {
	case err != nil:
		return found{}, err
	case st == nil || string(data) == name || served != nil && st.Czxid == served.Czxid && st.Mzxid == served.Mzxid:
		return found{}, ld.write(mpath, data, st, name)
	case data == nil:
		f := found{left: ld.seen.Left("\x00czxid:"+strconv.FormatInt(st.Czxid, 10), ld.d), at: st}
		if f.left <= 0 {
			return found{}, ld.write(mpath, data, st, name)
		}
		return f, nil
	}
	gone, stamped := strings.CutPrefix(string(data), goneMark)
	f := found{left: ld.seen.Left(gone, ld.d), at: st, gone: gone}
	if !stamped {
		if err := ld.write(mpath, data, st, goneMark+gone); err != nil {
			return found{}, err
		}
		return found{}, errReread
	}
	now, err := q.s.conn.Set(mpath, data, st.Version)
	switch {
	case errors.Is(err, zk.ErrNoAuth): // the local clock's rest, at st
	case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
		return found{}, errReread
	case err != nil:
		return found{}, q.wrap("set", err)
	default:
		// Whole milliseconds: the true elapsed time may be up to 1 ms less.
		elapsed := time.Duration(now.Mtime-now.Ctime-1) * time.Millisecond
		f.left, f.at = min(grant.Rest(ld.d, elapsed), f.left), now
	}
	if f.left <= 0 {
		return found{}, ld.write(mpath, data, f.at, name)
	}
	return f, nil
}

// read reads the marker (st nil: there is none; data nil: unreadable
// under its ACL, taken for another node's name).
func (ld *lockDelay) read(mpath string) ([]byte, *zk.Stat, error) {
	conn := ld.q.s.conn
	data, st, err := conn.Get(mpath)
	if errors.Is(err, zk.ErrNoAuth) {
		// Made by a Session whose ACL keeps it from this one: its
		// presence is what counts (exists needs no permission).
		var ok bool
		ok, st, err = conn.Exists(mpath)
		if data = nil; !ok {
			st = nil
		}
	}
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, nil, nil
	case err != nil:
		return nil, nil, ld.q.wrap("get", err)
	}
	return data, st, nil
}

// write names name in the marker read as (data, st): a create when there
// was none, else a multi that deletes it at the version read and creates
// it anew (so a lock needs no WRITE on a marker another Session made:
// CREATE and DELETE on the directory, as for its nodes). Nothing is sent
// when it names name already (an attempt again after a lost reply).
// errReread: the marker changed since the read (NodeExists, BadVersion,
// NoNode).
func (ld *lockDelay) write(mpath string, data []byte, st *zk.Stat, name string) error {
	q := ld.q
	if st != nil && string(data) == name {
		return nil
	}
	var err error
	if st == nil {
		_, err = q.s.conn.Create(mpath, []byte(name), 0, q.s.cfg.acl)
	} else {
		_, err = q.s.conn.Multi(&zk.DeleteRequest{Path: mpath, Version: st.Version},
			&zk.CreateRequest{Path: mpath, Data: []byte(name), Acl: q.s.cfg.acl})
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNotEmpty):
		// No lock makes children there: someone planted one, and the
		// marker can be neither replaced nor removed until it is gone.
		return fmt.Errorf("%w: %s has children, which no lock makes: delete them (the lock-delay's record cannot be written)",
			recipe.ErrMixedRecipes, shortpath.Of(mpath))
	case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
		return errReread
	}
	return q.wrap("create", err)
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
	tctx, end := cl.deleteContext(ctx, l.owner, true, 0)
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
		_, err = cl.s.conn.Multi(&zk.DeleteRequest{Path: l.path, Version: l.version},
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
