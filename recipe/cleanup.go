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

// cleaner is the Session's queue of deletes of its own znodes that could
// not be completed (connection loss during a release or a cancelled
// acquisition), and the janitor goroutine that retries them on every
// reconnection of the session that owns them, and sets own-node watches
// again (rewatchLeases). items is under Session.mu. See
// docs/design.md#cleanup-and-delete-by-version.
type cleaner struct {
	items []cleanupItem
	kick  chan struct{} // wakes the janitor
}

// keepOnly finishes and drops every item not owned by the session owner:
// the ephemerals of other sessions died with them.
func (c *cleaner) keepOnly(owner int64) {
	kept := c.items[:0]
	for _, it := range c.items {
		if it.owner == owner {
			kept = append(kept, it)
		} else {
			it.finish()
		}
	}
	c.items = kept
}

// finishOwner finishes the items of owner's session (lost: whoever waits
// for them stops waiting) but keeps them, in case the session comes back.
func (c *cleaner) finishOwner(owner int64) {
	for i := range c.items {
		if c.items[i].owner == owner {
			c.items[i].finish()
			c.items[i].done = nil
		}
	}
}

// finishAll finishes every item and empties the queue (Close: a closed
// session's ephemerals go with it).
func (c *cleaner) finishAll() {
	for _, it := range c.items {
		it.finish()
	}
	c.items = nil
}

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
	// node first (a lease's own node; see deleteByVersion).
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
// cleaner. It returns nil when the node is gone or was never ours. A delete
// given up by the rule of packet.go is logged at error level, not handed to
// the cleaner.
func (s *Session) deleteOwned(ctx context.Context, it cleanupItem, wait bool) error {
	it = it.sized()
	var err error
	if !wait && !s.State().IsConnected() {
		err = errNotConnected
	} else {
		tctx, done := s.cleanupContext(ctx, it.owner, wait)
		if wait {
			err = s.deleteWaited(tctx, &it)
		} else {
			err = s.deleteWhileConnected(tctx, &it)
		}
		done()
		if err == nil || errors.Is(err, ErrSessionClosed) {
			it.finish()
			return nil // a closed session's ephemerals are gone with it
		}
		if it.sends.lost >= maxLostSends {
			s.giveUpCleanup(it, err)
			it.finish()
			return err
		}
	}
	return s.deferCleanup(it, err)
}

// cleanupContext returns the context of deleteOwned's attempts: ctx's
// values, not its cancellation, bounded by the cleanup timeout (the session
// timeout by default). With wait, the caller may stop waiting (ctx ends)
// and a lost session's nodes went with it (its epoch ends). Without wait,
// a caller that gave up already gets abandonBudget; one whose context is
// live waits while the connection is up, and abandonBudget more should
// its context end. done releases it.
func (s *Session) cleanupContext(ctx context.Context, owner int64, wait bool) (_ context.Context, done func()) {
	timeout := s.cfg.cleanupTimeout
	if timeout == 0 {
		timeout = s.SessionTimeout()
	}
	if !wait && ctx.Err() != nil {
		timeout = min(timeout, abandonBudget)
	}
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stops := []func() bool{}
	if !wait && ctx.Err() == nil {
		stops = append(stops, context.AfterFunc(ctx, func() {
			time.AfterFunc(abandonBudget, func() { cancel(context.Cause(ctx)) })
		}))
	}
	tctx, tcancel := context.WithTimeoutCause(cctx, timeout, fmt.Errorf("recipe: cleanup timeout %v passed: %w", timeout, context.DeadlineExceeded))
	var waitStops []func() bool
	if wait {
		waitStops = append(waitStops, context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) }))
		if ep := s.epochOf(owner); ep != nil {
			waitStops = append(waitStops, context.AfterFunc(ep.ctx, func() { cancel(context.Cause(ep.ctx)) }))
		}
	}
	return tctx, func() {
		for i := len(waitStops) - 1; i >= 0; i-- {
			waitStops[i]()
		}
		tcancel()
		for _, stop := range stops {
			stop()
		}
		cancel(nil)
	}
}

// deleteWaited retries the delete of it until done or ctx ends, waiting
// for reconnections. The first attempt is sent even on a done ctx; only it
// may delete by version without reading the node: every retry, here or by
// the cleaner, checks owner and czxid.
func (s *Session) deleteWaited(ctx context.Context, it *cleanupItem) error {
	var tried atomic.Bool
	first := *it // never written: an abandoned attempt may still read it
	err, _ := s.retryLate(ctx, &it.sends, func() error {
		cur := first
		if tried.Swap(true) {
			cur.byVersion = false
		}
		return s.deleteOnce(cur)
	}, nil)
	return err
}

// deleteWhileConnected retries the delete of it only while the connection
// is up; the cleaner takes over as soon as it is not.
func (s *Session) deleteWhileConnected(ctx context.Context, it *cleanupItem) (err error) {
	for attempt := 0; ; attempt++ {
		cur := *it
		cur.byVersion = cur.byVersion && attempt == 0
		err = s.call(ctx, func() error { return s.deleteOnce(cur) }, nil)
		if gerr := it.sends.note(err); gerr != nil {
			err = gerr
			break
		}
		if err == nil || !isConnErr(err) || ctx.Err() != nil || !s.State().IsConnected() {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
	}
	if isClosing(err) {
		err = ErrSessionClosed
	}
	return err
}

// deferCleanup hands an unfinished delete (err: why) to the cleaner and
// returns what deleteOwned returns: nil when the owner's session is lost
// (its nodes went with it; the cleaner still deletes the node if that
// session comes back), else err.
func (s *Session) deferCleanup(it cleanupItem, err error) error {
	it.byVersion = false // the cleaner's attempts are retries
	s.mu.Lock()
	lost := s.conns.ownerLost(it.owner)
	queued := !s.closed
	if queued {
		s.queueCleanupLocked(it)
	}
	s.mu.Unlock()
	if !queued {
		it.finish()
	}
	if lost {
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
	if s.conns.ownerLost(it.owner) {
		it.finish()
		it.done = nil
	}
	s.cleaner.items = append(s.cleaner.items, it)
	kick(s.cleaner.kick)
}

// deleteOnce makes one attempt. It returns a connection error to be retried,
// nil when done.
func (s *Session) deleteOnce(it cleanupItem) error {
	s.mu.Lock()
	cur := s.conns.id()
	s.mu.Unlock()
	switch {
	case cur != it.owner:
		return nil // that session is gone, and its ephemerals with it
	case it.path == "":
		return s.deleteByGUID(it)
	case it.byVersion:
		if done, err := s.deleteByVersion(it); done {
			return err
		}
	}
	return s.deleteChecked(it)
}

// deleteByGUID deletes the nodes under it.dir whose names carry it.guid (a
// create whose reply was lost). It syncs first: the server answering may
// lag behind the one that applied the create.
func (s *Session) deleteByGUID(it cleanupItem) error {
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

// deleteByVersion is a lease's release in one request instead of exists +
// delete: made only as the first attempt of Release, while the connection
// is up and has not been down since the lease was registered (every retry,
// and the cleaner, check owner and czxid). The path names the node the
// lease was granted alone (its name carries a fresh GUID), and a node
// written since fails with BadVersion: done is false then, and the checked
// delete decides. See docs/design.md#cleanup-and-delete-by-version.
func (s *Session) deleteByVersion(it cleanupItem) (done bool, err error) {
	err = s.conn.Delete(it.path, it.version)
	switch {
	case err == nil, errors.Is(err, zk.ErrNoNode):
		return true, nil
	case errors.Is(err, zk.ErrBadVersion):
		return false, nil
	}
	return true, err
}

// deleteChecked deletes it.path only if its ephemeral owner (and czxid,
// when known) is the item's: the delete follows the identity check in this
// session's FIFO order, and its version makes it fail if the node was
// replaced in between.
func (s *Session) deleteChecked(it cleanupItem) error {
	for {
		ok, st, err := s.conn.Exists(it.path)
		if err != nil {
			return err
		}
		if !ok || st.EphemeralOwner != it.owner || (it.czxid != 0 && st.Czxid != it.czxid) {
			return nil // gone, or not ours: never delete another session's node
		}
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

// janitor sets own-node watches again and retries deferred cleanup deletes
// whenever it is kicked and the connection is up, and every second while
// something is left.
func (s *Session) janitor() {
	defer s.wg.Done()
	var retry <-chan time.Time
	for {
		select {
		case <-s.quit:
			return
		case <-s.cleaner.kick:
		case <-retry:
		}
		retry = nil
		ok := s.rewatchLeases()
		s.mu.Lock()
		items := s.cleaner.items
		s.cleaner.items = nil
		connected := s.conns.state.IsConnected()
		s.mu.Unlock()
		failed, closing := s.cleanRound(items, connected)
		if closing {
			return
		}
		if len(failed) > 0 {
			s.requeueCleanup(failed)
			ok = false
		}
		if !ok {
			retry = time.After(time.Second)
		}
	}
}

// cleanRound tries the deletes of items in order while the connection is
// up, and returns those to try again. closing reports that the Session is
// closing (every item left is finished).
func (s *Session) cleanRound(items []cleanupItem, connected bool) (failed []cleanupItem, closing bool) {
	for i, it := range items {
		if !connected {
			return append(failed, items[i:]...), false
		}
		err := s.deleteOnce(it)
		switch {
		case err == nil:
			it.finish()
			s.log.Debug("session cleaner: deleted", "node", it.String())
		case isClosing(err):
			for _, it := range items[i:] {
				it.finish()
			}
			return nil, true
		case !isConnErr(err):
			s.log.Error("session cleaner: delete failed", "node", it.String(), "err", err)
			it.finish()
		default:
			connected = false
			if gerr := it.sends.note(err); gerr != nil {
				s.giveUpCleanup(it, gerr)
				it.finish()
				continue
			}
			failed = append(failed, it)
		}
	}
	return failed, false
}

// requeueCleanup puts failed back at the front of the queue (an item of a
// lost session finished, as queueCleanupLocked does), or finishes them
// when the Session is closed.
func (s *Session) requeueCleanup(failed []cleanupItem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		for _, it := range failed {
			it.finish()
		}
		return
	}
	for i := range failed {
		if s.conns.ownerLost(failed[i].owner) {
			failed[i].finish()
			failed[i].done = nil
		}
	}
	s.cleaner.items = append(failed, s.cleaner.items...)
}

// PendingCleanup returns how many deletes of this Session's own znodes are
// waiting for a reconnection (normally 0). Exposed for tests and metrics.
func (s *Session) PendingCleanup() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cleaner.items)
}

// abandonBudget bounds how long a failed operation (a refused TryAcquire, a
// cancelled Acquire) still waits for the delete of the node it leaves once
// its caller's context is done; while that context is live it waits for the
// delete as long as the connection is up (capped by the cleanup timeout),
// so that a refusal under load returns only once its node is gone. What is
// not done by then, the cleaner finishes.
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
