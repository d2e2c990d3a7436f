package recipe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// cleanupItem names a znode of ours that must go: either by path (czxid 0 =
// unknown) or, when a create's reply was lost, by the GUID in its name under
// dir. owner is the ZooKeeper session that created (or may have created) it;
// a node with another owner is never touched.
type cleanupItem struct {
	path  string // absolute
	czxid int64
	owner int64
	dir   string // absolute; with guid, for nodes whose name we never learned
	guid  string
	// byVersion: delete path with this data version without reading the
	// node first (a lease's own node; see deleteOnce).
	byVersion bool
	version   int32
	// done, if set, is called once the item is finished: deleted, found
	// gone or not ours, dropped with its session, or failed for good. A
	// Queue counts its items this way so that Drain waits for them.
	done func()
	// sends bounds the requests of its deletes (size 0: from the path,
	// see sized) and counts their connection losses (see packet.go).
	sends lostSends
}

// sized returns c with sends.size set: what a request carrying its path
// may weigh. (An item by GUID is given its queue's.)
func (c cleanupItem) sized() cleanupItem {
	if c.sends.size == 0 {
		c.sends.size = max(len(c.path), len(c.dir)+1+len(protectedPrefix)+guidLen+seqLen) + pathSlack
	}
	return c
}

func (c cleanupItem) finish() {
	if c.done != nil {
		c.done()
	}
}

// String names the node for a log line, its path shortened (ShortPath).
func (c cleanupItem) String() string {
	if c.path != "" {
		return ShortPath(c.path)
	}
	return ShortPath(c.dir) + "/*" + c.guid + "*"
}

// deleteOwned deletes a znode of ours, whatever the caller's context has
// become: it runs on its own context (the caller's values, not its
// cancellation) bounded by the cleanup timeout, retries on connection loss,
// and deletes only a node whose ephemeral owner is the item's session (and
// whose czxid matches, when known). With wait false and the connection down
// it does not wait for a reconnection. Whatever it cannot finish goes to the
// Session's cleaner, which retries on every reconnection of that session.
// It returns nil when the node is gone or was never ours. A delete whose
// requests, over DefaultMaxPacket, lost their connection right after they
// were sent twice in a row is given up (see packet.go): logged at error
// level, not handed to the cleaner.
func (s *Session) deleteOwned(ctx context.Context, it cleanupItem, wait bool) (err error) {
	queued := false
	defer func() {
		if !queued {
			it.finish()
		}
	}()
	it = it.sized()
	if wait || s.State().IsConnected() {
		timeout := s.cfg.cleanupTimeout
		if timeout == 0 {
			timeout = s.SessionTimeout()
		}
		if !wait && ctx.Err() != nil {
			// The caller gave up (its context is done): give the delete a
			// short budget, then leave it to the cleaner rather than hold
			// the caller up.
			timeout = min(timeout, abandonBudget)
		}
		cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
		defer cancel(nil)
		if !wait && ctx.Err() == nil {
			// The caller's operation failed but its context is live (a
			// refused TryAcquire): the delete is waited for while the
			// connection is up; should the context end meanwhile, for
			// abandonBudget more.
			defer context.AfterFunc(ctx, func() {
				time.AfterFunc(abandonBudget, func() { cancel(context.Cause(ctx)) })
			})()
		}
		tctx, tcancel := context.WithTimeoutCause(cctx, timeout, fmt.Errorf("recipe: cleanup timeout %v passed: %w", timeout, context.DeadlineExceeded))
		defer tcancel()
		if wait {
			// The caller may stop waiting...
			defer context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })()
			// ...and a lost session's nodes go with it: stop waiting then.
			if ep := s.epochOf(it.owner); ep != nil {
				defer context.AfterFunc(ep.ctx, func() { cancel(context.Cause(ep.ctx)) })()
			}
			// ...but the first attempt is sent. Only the first attempt may
			// delete by version without reading the node (see deleteOnce):
			// every retry, here or by the cleaner, checks owner and czxid.
			var tried atomic.Bool
			first := it // never written: an abandoned attempt may still read it
			err, _ = s.retryLate(tctx, &it.sends, func() error {
				cur := first
				if tried.Swap(true) {
					cur.byVersion = false
				}
				return s.deleteOnce(cur)
			}, nil)
		} else {
			// Retry only while the connection is up; the cleaner takes over
			// as soon as it is not.
			for attempt := 0; ; attempt++ {
				cur := it
				cur.byVersion = cur.byVersion && attempt == 0
				err = s.call(tctx, func() error { return s.deleteOnce(cur) }, nil)
				if gerr := it.sends.note(err); gerr != nil {
					err = gerr
					break
				}
				if err == nil || !isConnErr(err) || tctx.Err() != nil || !s.State().IsConnected() {
					break
				}
				time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
			}
			if isClosing(err) {
				err = ErrSessionClosed
			}
		}
		if err == nil || errors.Is(err, ErrSessionClosed) {
			return nil // a closed session's ephemerals are gone with it
		}
		if it.sends.lost >= maxLostSends {
			s.giveUpCleanup(it, err)
			return err
		}
	} else {
		err = errNotConnected
	}
	it.byVersion = false // the cleaner's attempts are retries
	s.mu.Lock()
	lost := s.ownerLostLocked(it.owner)
	if !s.closed {
		s.queueCleanupLocked(it)
		queued = true
	}
	s.mu.Unlock()
	if lost {
		// The owner's session is lost (expired, or presumed expired after a
		// session timeout without any reply): its nodes went with it. The
		// cleaner still deletes the node if that session comes back.
		s.log.Debug("cleanup delete moot: the session is lost", "node", it.String())
		return nil
	}
	s.log.Warn("cleanup delete deferred to the session cleaner", "node", it.String(), "err", err)
	return err
}

// giveUpCleanup logs the end of a delete given up by the rule of packet.go.
func (s *Session) giveUpCleanup(it cleanupItem, err error) {
	s.log.Error("cleanup delete given up: the node, if it exists, stays until the session ends", "node", it.String(), "err", err)
}

// queueCleanupLocked hands it to the cleaner. An item of a lost session is
// finished at once (its node went with the session, as far as anyone
// waiting for it is concerned) but kept, in case the session comes back.
func (s *Session) queueCleanupLocked(it cleanupItem) {
	it = it.sized()
	if s.ownerLostLocked(it.owner) {
		it.finish()
		it.done = nil
	}
	s.cleanup = append(s.cleanup, it)
	s.kick(s.kickJanitor)
}

// epochOf returns the current epoch if it is owner's session, else nil.
func (s *Session) epochOf(owner int64) *epoch {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch != nil && s.epoch.id == owner {
		return s.epoch
	}
	return nil
}

// ownerLostLocked reports whether owner's session is known lost: a later
// session replaced it, or it is current but expired or presumed expired.
func (s *Session) ownerLostLocked(owner int64) bool {
	return s.epoch == nil || s.epoch.id != owner || s.epoch.cause != nil
}

// deleteOnce makes one attempt. It returns a connection error to be retried,
// nil when done.
func (s *Session) deleteOnce(it cleanupItem) error {
	s.mu.Lock()
	var cur int64
	if s.epoch != nil {
		cur = s.epoch.id
	}
	s.mu.Unlock()
	if cur != it.owner {
		return nil // that session is gone, and its ephemerals with it
	}
	if it.path == "" {
		// Sync first: the server answering may lag behind the one that
		// applied the create whose reply was lost.
		if _, err := s.conn.Sync(it.dir); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		children, _, err := s.conn.Children(it.dir)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, c := range children {
			if strings.HasPrefix(c, protectedPrefix+it.guid+"-") {
				if err := s.deleteOnce(cleanupItem{path: it.dir + "/" + c, owner: it.owner}); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if it.byVersion {
		// A lease's release: one request instead of exists + delete. It is
		// made only as the first attempt of Release, while the connection
		// is up and the lease was live a moment before (deleteOwned clears
		// byVersion for every retry and for the cleaner, which read the node
		// and check owner and czxid). Why this deletes only the node the
		// lease was granted:
		//  - the session is the one that created the node (checked above:
		//    never by path after a session change);
		//  - the path names that node alone: every name carries a GUID fresh
		//    for each Acquire (128 random bits) and the sequence the server
		//    assigned. A directory deleted and re-created under live
		//    participants restarts its sequence counter, so a sequence can
		//    come back, but never with our GUID: no client of this module
		//    creates this path again. Another node can be at this path only
		//    if a foreign client deleted ours and created the exact name.
		//    The deletion fires the lease's own-node watch, which ends the
		//    lease (ErrNodeDeleted) and Release then deletes nothing; what
		//    is left is a deletion and re-creation in the moments before
		//    this delete with the event still in flight, the window an
		//    exists + delete pair has between its two requests too;
		//  - after a connection loss the event may be lost with the
		//    connection and the foreign client has a whole disconnection to
		//    act in: that is why a retry never takes this path
		//    (TestReleaseRetryChecksOwner);
		//  - the version is the one last read for the lease (0 from the
		//    create, updated when a data change was seen): a node written
		//    since fails with BadVersion, and the checked path below decides.
		err := s.conn.Delete(it.path, it.version)
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			return nil
		case !errors.Is(err, zk.ErrBadVersion):
			return err
		}
	}
	for {
		ok, st, err := s.conn.Exists(it.path)
		if err != nil {
			return err
		}
		if !ok || st.EphemeralOwner != it.owner || (it.czxid != 0 && st.Czxid != it.czxid) {
			return nil // gone, or not ours: never delete another session's node
		}
		// The delete follows the identity check in this session's FIFO order;
		// the version makes it fail if the node was replaced in between.
		err = s.conn.Delete(it.path, st.Version)
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			return nil
		case errors.Is(err, zk.ErrBadVersion):
			continue
		default:
			return err
		}
	}
}

// janitor retries deferred cleanup deletes whenever the connection is up.
func (s *Session) janitor() {
	defer s.wg.Done()
	var retry <-chan time.Time
	for {
		select {
		case <-s.quit:
			return
		case <-s.kickJanitor:
		case <-retry:
		}
		retry = nil
		if !s.rewatchLeases() {
			retry = time.After(time.Second)
		}
		s.mu.Lock()
		items := s.cleanup
		s.cleanup = nil
		connected := s.state.IsConnected()
		s.mu.Unlock()
		if len(items) == 0 {
			continue
		}
		var failed []cleanupItem
		for i, it := range items {
			if !connected {
				failed = append(failed, items[i:]...)
				break
			}
			if err := s.deleteOnce(it); err != nil {
				if isClosing(err) {
					for _, it := range items[i:] {
						it.finish()
					}
					return
				}
				if !isConnErr(err) {
					s.log.Error("session cleaner: delete failed", "node", it.String(), "err", err)
					it.finish()
					continue
				}
				if gerr := it.sends.note(err); gerr != nil {
					s.giveUpCleanup(it, gerr)
					it.finish()
					connected = false
					continue
				}
				failed = append(failed, it)
				connected = false
				continue
			}
			it.finish()
			s.log.Debug("session cleaner: deleted", "node", it.String())
		}
		if len(failed) > 0 {
			s.mu.Lock()
			if !s.closed {
				for i := range failed {
					if s.ownerLostLocked(failed[i].owner) {
						failed[i].finish()
						failed[i].done = nil
					}
				}
				s.cleanup = append(failed, s.cleanup...)
			} else {
				for _, it := range failed {
					it.finish()
				}
			}
			s.mu.Unlock()
			retry = time.After(time.Second)
		}
	}
}

// PendingCleanup returns how many deletes of this Session's own znodes are
// waiting for a reconnection (normally 0). Exposed for tests and metrics.
func (s *Session) PendingCleanup() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cleanup)
}

// abandonBudget bounds how long a failed operation (a refused TryAcquire, a
// cancelled Acquire) still waits for the delete of the node it leaves once
// its caller's context is done; while that context is live it waits for the
// delete as long as the connection is up (capped by the cleanup timeout),
// so that a refusal under load returns only once its node is gone (an error
// leaves no node behind). What is not done by then, the cleaner finishes.
const abandonBudget = 250 * time.Millisecond

// errNotConnected is the connection error of an attempt not made because
// the connection is down.
var errNotConnected = fmt.Errorf("%w: not connected", zk.ErrConnectionClosed)

func opErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	if isClosing(err) {
		err = fmt.Errorf("%w (%v)", ErrSessionClosed, err)
	}
	return &OpError{Op: op, Path: path, Err: err}
}

// rewatchLeases sets a new data watch on the own node of every live lease
// whose watch was consumed by a data change, so a later deletion still ends
// the lease. It reports false if some must be retried.
func (s *Session) rewatchLeases() bool {
	s.mu.Lock()
	todo := s.rewatch
	s.rewatch = nil
	s.mu.Unlock()
	ok := true
	for _, l := range todo {
		if l.ctx.Err() != nil {
			continue
		}
		s.mu.Lock()
		czxid := l.czxid
		s.mu.Unlock()
		_, st, _, err := s.conn.GetW(l.path)
		s.mu.Lock()
		switch {
		case l.ctx.Err() != nil:
		case errors.Is(err, zk.ErrNoNode):
			s.revokeLeaseLocked(l, ErrNodeDeleted, false)
		case err != nil:
			s.rewatch = append(s.rewatch, l)
			ok = false
		case st.Czxid != czxid || st.EphemeralOwner != l.owner:
			s.revokeLeaseLocked(l, ErrNodeDeleted, false)
		default:
			l.version = st.Version
		}
		s.mu.Unlock()
	}
	return ok
}
