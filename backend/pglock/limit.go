package pglock

import (
	"container/list"
	"context"
	"fmt"
	"sync"

	"github.com/zkrecipes/zkrecipes/internal/ctxend"
)

// limiter bounds a Session's lock connections (WithMaxConns) and keeps
// waiters beyond the bound waiting in the process, without a connection:
//
//   - slots: one per lock connection, held from before the dial until the
//     connection is closed (a holder keeps its slot for its lease: the
//     advisory lock lives on the connection); handed out first come, first
//     served.
//   - turns: per lock key, at most one Acquire of this Session waits in the
//     server's queue; the others wait here, first come, first served, for
//     its turn to end (at its grant or its failure), and only then take a
//     slot. So many waiters for one lock cost one connection (plus the
//     holder's), and waiters for other locks are not starved by them.
//
// Fairness: first come, first served within the process for each lock and
// for the slots; across processes, the server's queue, where each Session
// stands once per lock.
type limiter struct {
	slots fifo
	mu    sync.Mutex
	turns map[int64]*turn
}

type turn struct {
	fifo
	users int // Acquire calls that hold or wait for the turn
}

func newLimiter(max int) *limiter {
	return &limiter{slots: fifo{free: max}, turns: map[int64]*turn{}}
}

// turn waits until it is this Acquire's turn to wait for key at the server,
// and returns the function that ends the turn (idempotent). It returns
// ctx's cause if ctx ends first.
func (l *limiter) turn(ctx context.Context, key int64, w *waitMark) (end func(), err error) {
	l.mu.Lock()
	t := l.turns[key]
	if t == nil {
		t = &turn{fifo: fifo{free: 1}}
		l.turns[key] = t
	}
	t.users++
	l.mu.Unlock()
	leave := func() {
		l.mu.Lock()
		if t.users--; t.users == 0 {
			delete(l.turns, key)
		}
		l.mu.Unlock()
	}
	if t.busy() {
		w.start()
	}
	if err := t.acquire(ctx); err != nil {
		leave()
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { t.release(); leave() }) }, nil
}

// fifo is a counting semaphore that serves its waiters in arrival order.
type fifo struct {
	mu   sync.Mutex
	free int
	q    list.List // of chan struct{}, closed when its waiter is granted
}

// busy reports whether acquire would wait.
func (f *fifo) busy() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.free == 0 || f.q.Len() > 0
}

// tryAcquire takes a unit if one is free and nobody waits.
func (f *fifo) tryAcquire() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.free > 0 && f.q.Len() == 0 {
		f.free--
		return true
	}
	return false
}

// acquire takes a unit, waiting behind earlier callers; it returns ctx's
// cause if ctx ends first (having taken nothing).
func (f *fifo) acquire(ctx context.Context) error {
	f.mu.Lock()
	if f.free > 0 && f.q.Len() == 0 {
		f.free--
		f.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	e := f.q.PushBack(ch)
	f.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	f.mu.Lock()
	select {
	case <-ch: // granted as ctx ended: pass the unit on
		f.mu.Unlock()
		f.release()
	default:
		f.q.Remove(e)
		f.mu.Unlock()
	}
	return ctxend.Cause(ctx)
}

// release returns a unit: to the first waiter, if any.
func (f *fifo) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.q.Front(); e != nil {
		close(f.q.Remove(e).(chan struct{}))
		return
	}
	f.free++
}

// Bounds of WithMaxConns.
const (
	// DefaultMaxConns is WithMaxConns's default: 16 lock connections per
	// Session, a sixth of PostgreSQL's default max_connections (100).
	DefaultMaxConns = 16
	// MaxMaxConns bounds WithMaxConns.
	MaxMaxConns = 10000
)

// WithMaxConns bounds the server connections a Session uses for its locks
// at n, 1 to MaxMaxConns (else recipe.ErrBadOption; default
// DefaultMaxConns). Each holder keeps one; one Acquire per lock waits at
// the server on one, the others in the process, first come first served,
// for their turn and then a free connection (ctx bounds the wait);
// TryAcquire returns ErrConnLimit when all n are in use. ConnectConfig's
// check uses one more while it runs. Keep n above the locks held plus the
// locks waited for at once, or a nested Acquire waits until its ctx ends.
func WithMaxConns(n int) Option { return func(o *options) { o.maxConns = n } }

// enter takes what an attempt needs before it dials: for Acquire (wait),
// the key's turn, then a connection slot, waiting first come first served
// for each (w marks the wait for Metrics.Waiting); for TryAcquire, a slot
// free now, else ErrConnLimit. endTurn ends the turn (a no-op for
// TryAcquire); the slot goes to the attempt's connection (dialLock), which
// gives it back when it is closed.
func (m *Mutex) enter(ctx context.Context, wait bool, w *waitMark) (endTurn func(), err error) {
	l := m.s.limit
	if !wait {
		if !l.slots.tryAcquire() {
			return nil, fmt.Errorf("%w (%d in use)", ErrConnLimit, m.s.maxConns)
		}
		return func() {}, nil
	}
	if endTurn, err = l.turn(ctx, m.key, w); err != nil {
		return nil, err
	}
	if l.slots.busy() {
		w.start()
	}
	if err := l.slots.acquire(ctx); err != nil {
		endTurn()
		return nil, err
	}
	return endTurn, nil
}

// waitMark reports an Acquire's wait to Metrics.Waiting once: +1 at the
// first start, -1 at stop. It is used by one goroutine.
type waitMark struct {
	m  *Mutex
	on bool
}

func (w *waitMark) start() {
	if mt := w.m.s.metrics; mt != nil && !w.on {
		w.on = true
		mt.Waiting(metricKind, w.m.name, 1)
	}
}

func (w *waitMark) stop() {
	if w.on {
		w.on = false
		w.m.s.metrics.Waiting(metricKind, w.m.name, -1)
	}
}
