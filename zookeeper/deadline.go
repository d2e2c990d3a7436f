package zookeeper

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The ownership deadlines, counted from the last server reply: see
// docs/zookeeper-client.md#connection-states-and-the-ownership-deadline.

// ownership is the pair of ownership deadlines of one session (epoch), in
// grant.Deadline: both count from the send time of the newest request a
// server answered (connState.replied acks them), ownership is suspended
// revokeAfter (the policy's) after it, and the session presumed expired a
// session timeout after it. A connection (re)established arms a new pair
// (armLocked); the session's loss and Close disarm it. The expiry
// deadline is made only once the suspension deadline has passed, from the
// same last reply (it cannot pass earlier: revokeAfter is below the
// timeout), so that a healthy connection's reply acks one deadline.
type ownership struct {
	revokeAfter, timeout time.Duration
	suspend              *grant.Deadline
	expire               atomic.Pointer[grant.Deadline] // nil until suspend has passed; set under Session.mu
}

// ack moves the deadlines to a request sent at sent that was answered.
func (o *ownership) ack(sent time.Time) {
	o.suspend.Ack(sent)
	if e := o.expire.Load(); e != nil {
		e.Ack(sent)
	}
}

func (o *ownership) stop() {
	o.suspend.Stop()
	if e := o.expire.Load(); e != nil {
		e.Stop()
	}
}

// armLocked arms the deadlines of the current session from its last
// server reply (a new session's handshake included), replacing the
// previous pair.
func (c *connState) armLocked() {
	timeout := c.wire.sessionTimeout()
	o := &ownership{revokeAfter: c.policy.revokeAfter(timeout), timeout: timeout}
	o.suspend = grant.NewDeadline(c.wire.lastReplyTime(), o.revokeAfter, c.deadlinePassed)
	if old := c.deadlines.Swap(o); old != nil {
		old.stop()
	}
	o.ack(c.wire.lastReplyTime()) // a reply that acked the old pair meanwhile
}

// expireLocked returns o's expiry deadline, made now if it was not.
func (c *connState) expireLocked(o *ownership) *grant.Deadline {
	if e := o.expire.Load(); e != nil {
		return e
	}
	e := grant.NewDeadline(c.wire.lastReplyTime(), o.timeout, c.deadlinePassed)
	o.expire.Store(e)
	e.Ack(c.wire.lastReplyTime()) // a reply noted before the Store, not acked to e
	return e
}

// disarmLocked stops the deadlines (the session is lost or closed: a new
// session arms its own).
func (c *connState) disarmLocked() {
	if o := c.deadlines.Swap(nil); o != nil {
		o.stop()
	}
}

// replied records that a request sent at sentAt (unix nanoseconds) was
// answered: the last server reply, and the deadlines. It runs on
// go-zookeeper's receive path (through zkwire), without Session.mu.
func (c *connState) replied(sentAt int64) {
	if c.wire.noteReply(sentAt) {
		if o := c.deadlines.Load(); o != nil {
			o.ack(time.Unix(0, sentAt))
		}
	}
}

// deadlinePassed is the deadlines' expire function.
func (c *connState) deadlinePassed() {
	c.mu.Lock()
	defer c.mu.unlock()
	c.checkDeadlinesLocked(time.Now())
}

// checkDeadlinesLocked applies the deadlines that have passed at now: the
// suspension policy, then the client-side expiry. The server heard from us
// no earlier than the send time they count from, so it cannot expire the
// session before that + the session timeout. A deadline applied twice (its
// timer and a deletion event, see Session.onEvent) changes nothing the
// second time.
func (c *connState) checkDeadlinesLocked(now time.Time) {
	o := c.deadlines.Load()
	if c.mu.closed || c.epoch == nil || o == nil {
		return
	}
	at := o.suspend.At()
	if now.Before(at) {
		return
	}
	dropConn := false
	if c.epoch.cause == nil && !(c.state == recipe.StateSuspended && c.leases.gen.revoked) {
		silent := now.Sub(at.Add(-o.revokeAfter))
		cause := fmt.Errorf("%w: no server reply for %v (policy %s, session timeout %v)", recipe.ErrSuspended, silent.Round(time.Millisecond), c.policy.describe(), o.timeout)
		c.suspendLocked(cause)
		c.leases.revokeGenLocked(cause)
		dropConn = true
	}
	if c.epoch.cause == nil && !now.Before(c.expireLocked(o).At()) {
		c.loseEpochLocked(fmt.Errorf("%w: no server reply within the session timeout %v; presumed expired", recipe.ErrSessionLost, o.timeout))
		dropConn = true
	}
	if dropConn {
		// Make go-zookeeper reconnect (and so re-validate the session) even
		// if its own read deadline didn't fire (a paused process, a dialer
		// whose connections ignore deadlines): the handshake tells whether
		// the session survived.
		c.wire.dropConn()
	}
}
