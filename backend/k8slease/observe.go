package k8slease

import (
	"context"
	"errors"
	"log/slog"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/internal/notify"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// ObserveHolder delivers the lock's state (as Holder reads it) at once and
// after every change, coalesced for a slow reader; consecutive states
// differ, and successive holders' tokens grow (0 only for a client-go
// leader whose grant's write it did not see). It reads the Lease, watches it
// from that version, and reads and watches again when the watch ends (410
// Gone included); a silent holder is shown free D after this Session first
// saw its newest version (D: the duration in it, at least the Session's). A
// failed read is retried (50 ms doubling to 5 s, logged at Warn); a
// malformed record is logged and skipped. The channel closes when ctx ends
// or the Session closes.
func (m *Mutex) ObserveHolder(ctx context.Context) <-chan recipe.HolderState {
	out := notify.NewLatest(recipe.HolderState.Equal)
	if !m.s.life.Go(func() {
		defer out.Close()
		ctx, cancel := m.s.life.Bind(ctx)
		defer cancel()
		(&observer{m: m, out: out}).run(ctx)
	}) {
		out.Close()
	}
	return out.C()
}

// observeRetryMax is the longest wait between an observer's failed reads.
const observeRetryMax = 5 * time.Second

// errNoWatch is an observer's read error when its watch did not start.
var errNoWatch = errors.New("the watch of the Lease did not start")

// observer is ObserveHolder's loop and what it knows.
type observer struct {
	m   *Mutex
	out *notify.Latest[recipe.HolderState]

	cur     *coordv1.Lease // the newest version applied (nil: none)
	rv      fence.Token    // the newest resourceVersion applied
	floor   fence.Token    // a version that named another holder, or none: the holder's grant came after it
	expires time.Time      // when the held state shown by cur lapses (zero: not held)
	learned recipe.Holder  // the newest holder whose token was read, for its later versions
}

// run reads and watches the Lease until ctx ends.
func (o *observer) run(ctx context.Context) {
	m := o.m
	b := loop.BackOff(retryFirst, observeRetryMax)
	var w *leaseWatch
	defer func() { w.stop() }()
	var events <-chan watch.Event
	readAt := time.Now() // when to read (and watch) the Lease again; zero: not before the watch ends
	failing := false     // the last read failed (said at Warn): a watch that fails again is said at Debug
	for {
		if !readAt.IsZero() && !time.Now().Before(readAt) {
			w.stop()
			w, events, readAt = nil, nil, time.Time{}
			cur, err := o.get(ctx)
			if err == nil {
				o.apply(cur, cur == nil)
				if w = m.startWatch(ctx, versionOf(cur)); w != nil {
					events = w.w.ResultChan()
				} else if !m.s.watchRefused(m.path) {
					err = errNoWatch
				}
			}
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				level := slog.LevelWarn
				if failing && errors.Is(err, errNoWatch) {
					// Said once a streak: a watch from the newest version (of
					// a Lease that does not exist) can time out waiting for
					// the API server's cache to reach it.
					level = slog.LevelDebug
				}
				m.s.log.Log(ctx, level, "k8slease: observing the holder: reading the Lease failed; retrying", "lock", m.path, "error", err)
				readAt = time.Now().Add(b.NextBackOff())
			case w == nil: // no right to watch (said once): read it every poll
				readAt = time.Now().Add(pollEvery(m.s.cfg.duration))
			}
			failing = err != nil
		}
		ev, wk := o.wait(ctx, events, earliestSet(readAt, o.expires))
		switch wk {
		case wakeDone:
			return
		case wakeTimer:
			if !o.expires.IsZero() && !time.Now().Before(o.expires) {
				o.refresh(time.Now())
			}
		case wakeEvent:
			switch l, _ := ev.Object.(*coordv1.Lease); {
			case ev.Type == watch.Error:
				m.s.log.Debug("k8slease: observing the holder: the watch ended", "lock", m.path, "error", apierrors.FromObject(ev.Object))
				events, readAt = nil, time.Now().Add(b.NextBackOff())
			case l == nil: // a bookmark, or not a Lease
			case ev.Type == watch.Added || ev.Type == watch.Modified || ev.Type == watch.Deleted:
				o.apply(l, ev.Type == watch.Deleted)
				b.Reset()
			}
		case wakeClosed: // the server ended the watch
			events, readAt = nil, time.Now().Add(b.NextBackOff())
		}
	}
}

// get reads the Lease once (nil: it does not exist), within attemptTimeout.
func (o *observer) get(ctx context.Context) (*coordv1.Lease, error) {
	m := o.m
	tctx, cancel := context.WithTimeout(ctx, attemptTimeout(m.s.cfg.duration))
	defer cancel()
	cur, err := m.leases().Get(tctx, m.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return cur, err
}

// apply records a version of the Lease that a read or an event showed
// (gone: it was deleted, obj being the deleted one, or nil after a read),
// unless it is not newer than one applied, and queues the state it shows.
func (o *observer) apply(obj *coordv1.Lease, gone bool) {
	var rv fence.Token
	if obj != nil {
		var err error
		if rv, err = tokenOf(obj.ResourceVersion); err != nil {
			o.m.s.log.Warn("k8slease: observing the holder: a version skipped", "lock", o.m.path, "error", err)
			return
		}
		if rv <= o.rv {
			return
		}
	}
	if gone {
		obj = nil
	}
	if id := holderOf(obj); id != "" && id != holderOf(o.cur) {
		o.floor = o.rv // the version before named another holder, or none
	}
	o.cur, o.rv = obj, max(o.rv, rv)
	o.refresh(time.Now())
}

// refresh queues the state that the newest version shows at now. A
// holder's token that does not exceed a version naming someone else can
// only be forged: it is logged and skipped, as a malformed record is (the
// state the reader has stays, and the holder's next renewal or the Lease's
// expiry moves on). So the tokens of successive holders grow.
func (o *observer) refresh(now time.Time) {
	st, until, known, err := o.m.stateAt(o.cur, now)
	o.expires = until
	h := &st.Holder
	switch {
	case err != nil:
	case !st.Held:
	case known && h.Token <= o.floor:
		err = &recipe.OpError{Op: "holder", Path: o.m.path, Err: ErrBadRecord}
	case known:
		o.learned = *h
	case o.learned.ID == h.ID && o.learned.Since.Equal(h.Since):
		h.Token = o.learned.Token // a later version of a grant whose token was read
	}
	if err != nil {
		o.m.s.log.Warn("k8slease: observing the holder: a version skipped", "lock", o.m.path, "error", err)
		return
	}
	o.queue(st)
}

// queue hands st to the reader (notify.Latest: in place of a state not
// taken yet, unless the reader has it already).
func (o *observer) queue(st recipe.HolderState) { o.out.Offer(st) }

// wake is why wait returned.
type wake int

const (
	wakeDone   wake = iota // ctx ended
	wakeTimer              // the time given came
	wakeEvent              // an event arrived
	wakeClosed             // the watch's channel closed
)

// wait waits for ctx's end, an event, or the time at (zero: none).
func (o *observer) wait(ctx context.Context, events <-chan watch.Event, at time.Time) (watch.Event, wake) {
	var timer <-chan time.Time
	if !at.IsZero() {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return watch.Event{}, wakeDone
	case <-timer:
		return watch.Event{}, wakeTimer
	case ev, ok := <-events:
		if !ok {
			return watch.Event{}, wakeClosed
		}
		return ev, wakeEvent
	}
}

// earliestSet returns the earlier of a and b that is set (zero: neither).
func earliestSet(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero():
		return a
	}
	return earliest(a, b)
}
