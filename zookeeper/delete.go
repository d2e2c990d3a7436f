package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The deletes of owned znodes: cleaner.delete (a release, the node a failed
// Acquire leaves) and the attempts the cleaner makes. Every attempt but a
// release's first checks ephemeral owner and czxid before it deletes: see
// docs/zookeeper-client.md#cleanup-and-delete-by-version.

// delete deletes a znode of ours, whatever the caller's context has
// become: it runs on its own context (the caller's values, not its
// cancellation) bounded by the cleanup timeout, retries on connection loss,
// and deletes only a node whose ephemeral owner is the item's session (and
// whose czxid matches, when known). With wait false and the connection down
// it does not wait for a reconnection. Whatever it cannot finish goes to the
// queue. It returns nil when the node is gone or was never ours. A delete
// given up by the rule of packet.go is logged at error level, not queued.
func (cl *cleaner) delete(ctx context.Context, it cleanupItem, wait bool) error {
	it = it.sized()
	var spent time.Duration // by the quick attempt, out of the cleanup timeout
	if wait && it.byVersion {
		start := time.Now()
		if cl.deleteQuick(ctx, it) {
			it.finish()
			return nil
		}
		spent = time.Since(start)
	}
	var err error
	if !wait && !cl.conns.connected() {
		err = errNotConnected
	} else {
		tctx, done := cl.deleteContext(ctx, it.owner, wait, spent)
		if wait {
			err = cl.deleteWaited(tctx, &it)
		} else {
			err = cl.deleteWhileConnected(tctx, &it)
		}
		done()
		if err == nil || errors.Is(err, recipe.ErrSessionClosed) {
			it.finish()
			return nil // a closed session's ephemerals are gone with it
		}
		if it.sends.lost >= maxLostSends {
			cl.giveUp(it, err)
			it.finish()
			return err
		}
	}
	return cl.deferDelete(it, err)
}

// deleteQuick is a lease's release in one request instead of exists +
// delete, as one call answered while its caller waits (none of
// deleteContext's contexts and timer): made only as the first attempt of
// Release, while the connection is up and has not been down since the
// lease was registered (every retry, and the cleaner, check owner and
// czxid). The path names the node the lease was granted alone (its name
// carries a fresh GUID), and a node written since fails with BadVersion.
// It reports whether the node is gone; if not (BadVersion, the caller
// left, the owner's session ended, the Session closed, the connection is
// down), delete's checked path decides while this call may still be in
// flight. See docs/zookeeper-client.md#cleanup-and-delete-by-version.
func (cl *cleaner) deleteQuick(ctx context.Context, it cleanupItem) bool {
	ep := cl.conns.epochOf(it.owner)
	if ctx.Err() != nil || ep == nil || it.sends.size > defaultMaxPacket {
		return false
	}
	c := &ownCall{}
	if err := cl.s.start(c, zkwire.OpDelete, it.path, zkwire.Int32(it.version)); err != nil {
		return false
	}
	select {
	case <-c.done:
		return c.err == nil || errors.Is(c.err, zk.ErrNoNode)
	case <-ctx.Done():
	case <-ep.ctx.Done():
	case <-cl.quit:
	}
	return false
}

// deleteContext returns the context of delete's attempts: ctx's values,
// not its cancellation, bounded by the cleanup timeout (the session timeout
// by default). With wait (a Release, Leave) it also ends abandonBudget after
// ctx ends (at once for a ctx already done: the attempts still get that
// long, and a delete that completes in it is a success), and when the
// owner's session is lost (its nodes went with it). Without wait (the node
// of a failed Acquire or TryAcquire) ctx's end does not shorten it: it ends
// when the connection is down (see whileUp). spent is taken off the
// cleanup timeout (deleteQuick's wait). done releases it.
func (cl *cleaner) deleteContext(ctx context.Context, owner int64, wait bool, spent time.Duration) (_ context.Context, done func()) {
	if !wait {
		return cl.whileUp(ctx)
	}
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stops := []func() bool{context.AfterFunc(ctx, func() {
		time.AfterFunc(abandonBudget, func() { cancel(context.Cause(ctx)) })
	})}
	if ep := cl.conns.epochOf(owner); ep != nil {
		stops = append(stops, context.AfterFunc(ep.ctx, func() { cancel(context.Cause(ep.ctx)) }))
	}
	timeout := cl.timeout()
	tctx, tcancel := context.WithTimeoutCause(cctx, timeout-spent, cleanupTimeoutError(timeout))
	return tctx, func() {
		for _, stop := range stops {
			stop()
		}
		tcancel()
		cancel(nil)
	}
}

// timeout is the cleanup timeout: WithCleanupTimeout's, or the session
// timeout.
func (cl *cleaner) timeout() time.Duration {
	if cl.cleanupTimeout > 0 {
		return cl.cleanupTimeout
	}
	return cl.wire.sessionTimeout()
}

// whileUp returns the context of a failed operation's cleanup (its wait
// for a create in flight, its delete): ctx's values, not its cancellation,
// bounded by the cleanup timeout, and ended (cause errNotConnected) as soon
// as the connection is not up, the server is silent (errServerSilent: see
// watchUp), or (recipe.ErrSessionClosed) the Session closes. A caller who
// cancelled still waits for its node to go while the server answers; with
// the connection down (or a frozen server) nobody can delete it before the
// server answers again, and the cleaner does it then. done releases it.
func (cl *cleaner) whileUp(ctx context.Context) (_ context.Context, done func()) {
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	timeout := cl.timeout()
	tctx, tcancel := context.WithTimeoutCause(cctx, timeout, cleanupTimeoutError(timeout))
	go cl.watchUp(tctx, ctx.Done(), cancel)
	return tctx, func() {
		tcancel()
		cancel(nil)
	}
}

// probeWait is how long a cleanup's probe of the server (a read of "/",
// sent once the cleanup ran probeStart, and again probeWait after each
// answer) is waited for. The probe is no write, so a server slow to commit writes (or
// busy) still answers it: a slow create or delete is waited for while the
// server answers; a server that answers nothing (frozen) is taken for a
// connection down.
const probeWait = 500 * time.Millisecond

// probeWaitFor is the probe's wait on this link: probeWait, or four of
// the link's round trips (rttFilter: the smallest of the last few, so that
// a loaded machine does not stretch it) if that is longer (a slow link is
// no silent server), within the cleanup timeout.
func (cl *cleaner) probeWaitFor() time.Duration {
	return min(max(probeWait, 4*cl.wire.rtt.get()), cl.timeout())
}

// probeStart: a cleanup done sooner sends no probe.
const probeStart = 50 * time.Millisecond

// errServerSilent is the cause of a cleanup's end when the server answered
// nothing, not even a read, in the probe's wait: a connection error.
var errServerSilent error = serverSilentError{}

type serverSilentError struct{}

func (serverSilentError) Error() string {
	return "recipe: the server answered no read in time (a frozen server, or a link slower than the cleanup waits for)"
}

func (serverSilentError) Unwrap() error { return zk.ErrConnectionClosed }

// watchUp ends ctx (cancel) when the connection is not up, the server is
// silent, or the Session closes; it returns when ctx ends. The server is
// probed only once the caller left (left closed): a caller still waiting
// waits for the cleanup while the connection is up.
func (cl *cleaner) watchUp(ctx context.Context, left <-chan struct{}, cancel context.CancelCauseFunc) {
	c := cl.conns
	probe := time.NewTimer(time.Hour)
	probe.Stop()
	defer probe.Stop()
	for {
		st, ch, closed := c.watch()
		switch {
		case closed:
			cancel(recipe.ErrSessionClosed)
			return
		case !st.IsConnected():
			cancel(errNotConnected)
			return
		}
		select {
		case <-ch:
		case <-left:
			left = nil // probe from now on
			if m := cl.silent.Load(); m != 0 && m == cl.wire.lastReply.Load() {
				cancel(errServerSilent) // still silent: no reply since a probe failed
				return
			}
			probe.Reset(probeStart)
		case <-ctx.Done():
			return
		case <-c.quit:
			cancel(recipe.ErrSessionClosed)
			return
		case <-probe.C:
			mark := cl.wire.lastReply.Load()
			wait := cl.probeWaitFor()
			pctx, pcancel := context.WithTimeout(ctx, wait)
			_, _, err := cl.s.exists(pctx, "/", false)
			pcancel()
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, errNotConnected) {
				cancel(errNotConnected) // the connection is down, not silent
				return
			}
			if err != nil && cl.wire.lastReply.Load() == mark {
				cl.silent.Store(mark)
				cancel(errServerSilent)
				return
			}
			probe.Reset(wait)
		}
	}
}

// cleanupTimeoutError is the cause of a delete's end at the cleanup
// timeout (its value); it matches context.DeadlineExceeded. A type, not a
// formatted error: every Release makes one.
type cleanupTimeoutError time.Duration

func (e cleanupTimeoutError) Error() string {
	return fmt.Sprintf("recipe: cleanup timeout %v passed: %v", time.Duration(e), context.DeadlineExceeded)
}

func (e cleanupTimeoutError) Unwrap() error { return context.DeadlineExceeded }

// deleteWaited retries the delete of it until done or ctx ends, waiting
// for reconnections. The first attempt is sent even on a done ctx.
func (cl *cleaner) deleteWaited(ctx context.Context, it *cleanupItem) error {
	cur := *it
	return cl.req.retryOwn(ctx, &it.sends, func(ctx context.Context) error { return cl.deleteOnce(ctx, cur) })
}

// deleteWhileConnected retries the delete of it only while the connection
// is up; the cleaner takes over as soon as it is not.
func (cl *cleaner) deleteWhileConnected(ctx context.Context, it *cleanupItem) (err error) {
	for attempt := 0; ; attempt++ {
		err = cl.deleteOnce(ctx, *it)
		if gerr := it.sends.note(err); gerr != nil {
			err = gerr
			break
		}
		if err == nil || !isConnErr(err) || ctx.Err() != nil || !cl.conns.connected() {
			break
		}
		_ = loop.Sleep(cl.req.life.Context(), time.Duration(attempt+1)*10*time.Millisecond)
	}
	if isClosing(err) {
		err = recipe.ErrSessionClosed
	}
	return err
}

// deferDelete hands an unfinished delete (err: why) to the cleaner and
// returns what delete returns: nil when the owner's session is lost
// (its nodes went with it; the cleaner still deletes the node if that
// session comes back), else err.
func (cl *cleaner) deferDelete(it cleanupItem, err error) error {
	cl.mu.Lock()
	lost := cl.conns.ownerLostLocked(it.owner)
	queued := !cl.mu.closed
	if queued {
		cl.queueLocked(it)
	}
	cl.mu.Unlock()
	if !queued {
		it.finish()
	}
	if lost {
		cl.log.Debug("cleanup delete moot: the session is lost", "node", it.String())
		return nil
	}
	cl.log.Warn("cleanup delete deferred to the session cleaner", "node", it.String(), "err", err)
	return err
}

// giveUp logs the end of a delete given up by the rule of packet.go.
func (cl *cleaner) giveUp(it cleanupItem, err error) {
	cl.log.Error("cleanup delete given up: the node, if it exists, stays until the session ends", "node", it.String(), "err", err)
}

// deleteOnce makes one attempt, checked (deleteChecked), or by GUID. It
// returns a connection error to be retried, nil when done.
func (cl *cleaner) deleteOnce(ctx context.Context, it cleanupItem) error {
	cl.mu.Lock()
	cur := cl.conns.idLocked()
	cl.mu.Unlock()
	switch {
	case cur != it.owner:
		return nil // that session is gone, and its ephemerals with it
	case it.path == "":
		return cl.deleteByGUID(ctx, it)
	}
	return cl.deleteChecked(ctx, it)
}

// deleteByGUID deletes the nodes under it.dir whose names carry it.guid (a
// create whose reply was lost). It syncs first: the server answering may
// lag behind the one that applied the create.
func (cl *cleaner) deleteByGUID(ctx context.Context, it cleanupItem) error {
	if err := cl.s.do(ctx, &ownCall{}, zkwire.OpSync, it.dir, nil); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	children, err := cl.s.children(ctx, it.dir, false)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, c := range children {
		if strings.HasPrefix(c, protectedPrefix+it.guid+"-") {
			if err := cl.deleteOnce(ctx, cleanupItem{path: it.dir + "/" + c, owner: it.owner}); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteChecked deletes it.path only if its ephemeral owner (and czxid,
// when known) is the item's: the delete follows the identity check in this
// session's FIFO order, and its version makes it fail if the node was
// replaced in between.
func (cl *cleaner) deleteChecked(ctx context.Context, it cleanupItem) error {
	for {
		ok, st, err := cl.s.exists(ctx, it.path, false)
		if err != nil {
			return err
		}
		if !ok || st.EphemeralOwner != it.owner || (it.czxid != 0 && st.Czxid != it.czxid) {
			return nil // gone, or not ours: never delete another session's node
		}
		err = cl.s.remove(ctx, it.path, st.Version)
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

// abandonBudget bounds how long a Release's delete (Leave's too) still
// runs once its caller's context is done. A Release reports a delete it
// did not confirm (an error; the cleaner finishes it), so a caller who
// gave up waiting is not held longer than this. A failed Acquire's
// cleanup has no such budget: its error promises that nothing is left, so
// it waits while the connection is up (whileUp).
const abandonBudget = 250 * time.Millisecond

// errNotConnected is the connection error of an attempt not made because
// the connection is down.
var errNotConnected = fmt.Errorf("%w: not connected", zk.ErrConnectionClosed)
