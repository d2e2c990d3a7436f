package grant

import (
	"sync"
	"time"
)

// Deadline is the ownership deadline, the one rule that keeps a holder's
// "ownership in doubt" ahead of the server's grant to someone else:
// ownership ends span after the send time of the newest request the server
// acknowledged. The server heard from us no earlier than that send, so it
// keeps the grant at least its own bound (a TTL, a session timeout) after
// it; a span shorter than that bound leaves the rest as the margin for a
// late timer and for clock rates. Each backend states its span and bound
// (docs/backends.md).
type Deadline struct {
	span   time.Duration
	expire func()

	mu      sync.Mutex
	at      time.Time // acked + span
	timer   *time.Timer
	stopped bool // expired or stopped: nothing moves it any more
}

// NewDeadline arms a deadline span after sent, the send time of the
// request that made the grant. expire runs once, on a goroutine of its
// own, when the deadline passes with no later Ack; not after Stop.
func NewDeadline(sent time.Time, span time.Duration, expire func()) *Deadline {
	d := &Deadline{span: span, expire: expire, at: sent.Add(span)}
	d.mu.Lock()
	d.timer = time.AfterFunc(time.Until(d.at), d.fire)
	d.mu.Unlock()
	return d
}

// Ack records that a request sent at sent was acknowledged: the deadline
// moves to sent+span if that is later. An Ack after the deadline passed
// changes nothing: ownership has ended, whatever the server says now.
// It leaves the timer alone (one timer operation per span, not per Ack:
// a backend acks every reply): the timer, set for an earlier deadline,
// finds it moved and sets itself again (fire).
func (d *Deadline) Ack(sent time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	at := sent.Add(d.span)
	if d.stopped || !time.Now().Before(d.at) || !at.After(d.at) {
		return
	}
	d.at = at
}

// At returns the deadline: a request that could extend ownership is
// bounded by it, since an answer after it comes too late.
func (d *Deadline) At() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at
}

// Check expires the deadline now if it has passed (for a timer that fires
// late: a caller about to rely on ownership checks first), and reports
// whether it has passed.
func (d *Deadline) Check() bool {
	d.mu.Lock()
	passed := !time.Now().Before(d.at)
	run := passed && !d.stopped
	if run {
		d.stopped = true
		d.timer.Stop()
	}
	d.mu.Unlock()
	if run {
		d.expire()
	}
	return passed
}

// Stop disarms the deadline (the grant ended otherwise); expire will not
// run unless it has started already.
func (d *Deadline) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	d.timer.Stop()
}

// fire is the timer's function: it expires the deadline unless an Ack
// moved it after the timer was set (then it sets the timer again).
func (d *Deadline) fire() {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	if wait := time.Until(d.at); wait > 0 {
		d.timer.Reset(wait)
		d.mu.Unlock()
		return
	}
	d.stopped = true
	d.mu.Unlock()
	d.expire()
}
