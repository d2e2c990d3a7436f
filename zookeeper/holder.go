package zookeeper

import (
	"context"
	"errors"
	"sync"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
)

// The holder of a queue with a lock-delay (mutex.WithLockDelay): its first
// node holds only once its grant wrote the marker, before the grant was
// handed out; while it serves the delay, the lock is free. Reads, for head
// H read at t0, the marker M at t1, H confirmed present at t2: H is first
// throughout [t0, t2] (later nodes sort after it), and the holder at t1,
// if any, is the first node, which its grant named in M before t1 and
// which keeps M until its node is gone. So M naming H at t1 is "held by H"
// at t1, and any other M (another name, "gone:…", none) is "free" at t1.

// Holder reads the queue's holder: its head (Head), but for a queue with a
// lock-delay a head that is still serving the delay is no holder (Present
// false). Operations: Head's, and with a lock-delay a getData of the
// marker and a getData of the head. Errors: as Head.
func (q *Queue) Holder(ctx context.Context) (Head, error) {
	for {
		h, err := q.Head(ctx)
		if err != nil || !h.Present || q.delay == nil {
			return h, err
		}
		named, err := q.markerNames(ctx, h)
		if err == nil && named {
			return h, nil
		}
		if err != errHeadGone {
			return Head{}, err
		}
	}
}

// errHeadGone asks the reader to read the head again.
var errHeadGone = errors.New("zookeeper: the head went while its grant was read")

// markerNames reads the marker, then confirms h is still there: named
// reports that the marker names h (its grant was handed out). errHeadGone:
// h went meanwhile.
func (q *Queue) markerNames(ctx context.Context, h Head) (named bool, err error) {
	s := q.d.s
	var data []byte
	err = s.req.retry(ctx, q.d.reqSize, func() (err error) {
		data, _, err = s.conn.Get(markerPath(q.d.adir))
		return err
	})
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return false, q.d.wrap("get", err)
	}
	_, err = s.stat(ctx, q.d.adir+"/"+h.Node.Name, false)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return false, errHeadGone
	case err != nil:
		return false, q.d.wrap("get", err)
	}
	return string(data) == h.Node.Name, nil
}

// holderHeads is heads for Holder's view: with a lock-delay, the marker is
// watched beside the head (a grant writes it), and a head serving the
// delay is reported as no holder.
func (q *Queue) holderHeads() zkside.Observed[Head] {
	o := q.heads()
	if q.delay != nil {
		o.Source = holderSource{q}
	}
	return o
}

// holderSource is a queue-with-lock-delay's zkside.Source for Holder.
type holderSource struct{ q *Queue }

func (h holderSource) Same(a, b Head) bool { return headSource{}.Same(a, b) }

func (h holderSource) Read(ctx context.Context) (Head, <-chan struct{}, func(), error) {
	q := h.q
	for {
		head, wake, stop, err := q.d.headAndWatch(ctx)
		if err != nil || !head.Present {
			return head, wake, stop, err
		}
		mw := &wakeup{ch: make(chan struct{})}
		mstop, err := q.d.s.watches.watchPath(ctx, mw, existWatch, markerPath(q.d.adir))
		if err != nil {
			stop()
			return Head{}, nil, nil, q.d.wrap("watch", err)
		}
		both := func() { stop(); mstop() }
		named, err := q.markerNames(ctx, head)
		if err == errHeadGone {
			both()
			continue
		}
		if err != nil {
			both()
			return Head{}, nil, nil, err
		}
		if !named {
			head = Head{}
		}
		ch, quit := q.d.s.either(wake, mw.ch)
		return head, ch, func() { both(); quit() }, nil
	}
}

// either returns a channel closed once a or b is (or the Session closes),
// from a goroutine of the Session's that quit ends.
func (s *Session) either(a, b <-chan struct{}) (_ <-chan struct{}, quit func()) {
	out, stop := make(chan struct{}), make(chan struct{})
	if !s.spawn(func() {
		defer close(out)
		select {
		case <-a:
		case <-b:
		case <-stop:
		case <-s.quit:
		}
	}) {
		close(out)
	}
	var once sync.Once
	return out, func() { once.Do(func() { close(stop) }) }
}
