package zookeeper

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/cenkalti/backoff/v4"
	"github.com/zkrecipes/zkrecipes/internal/life"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// requests runs requests on behalf of a caller: one attempt (call), or
// attempts until success, a lasting error, ctx's end or Close (retry).
// They run on the Session's workers (pool.go) so that the caller can stop
// waiting.
type requests struct {
	pool       *workers
	conns      *connState // retries wait for the connection
	quit       <-chan struct{}
	life       *life.Group // the Session's: retries end at Close
	newBackOff func() backoff.BackOff
}

// retry runs op until it succeeds, fails with a non-connection error, ctx
// ends, or the session is closed. Between attempts it waits for the
// connection and backs off per the retry policy. size bounds the requests
// op sends: over DefaultMaxPacket, op is not tried again once they lost
// their connection right after being sent maxLostSends times in a row (see
// packet.go); it then fails with an error matching recipe.ErrTooLarge.
func (r *requests) retry(ctx context.Context, size int, op func() error) error {
	err, _ := r.retryLate(ctx, &lostSends{size: size}, op, nil)
	return err
}

// retryLate is retry where late, if not nil, is called with the outcome of
// an attempt that completed after the caller stopped waiting for it (ctx
// ended or the session closed while the request was in flight), so that an
// effect nobody is waiting for any more (a created node) can be undone.
// abandoned reports that this happened: late will be called (once) after
// the in-flight request completes. sends carries the size of op's requests
// and counts its connection losses (see packet.go).
func (r *requests) retryLate(ctx context.Context, sends *lostSends, op func() error, late func(error)) (_ error, abandoned bool) {
	var b backoff.BackOff
	for first := true; ; first = false {
		// The first attempt is made even on a done ctx: cleanup deletes rely
		// on it being sent.
		if err := ctx.Err(); err != nil && !first {
			return context.Cause(ctx), false
		}
		err, abandoned := r.callLate(ctx, op, late)
		if abandoned {
			return err, true
		}
		if err == nil || !isConnErr(err) {
			if isClosing(err) {
				return recipe.ErrSessionClosed, false
			}
			return err, false
		}
		if err := sends.note(err); err != nil {
			return err, false
		}
		if b == nil {
			b = r.newBackOff()
		}
		d := b.NextBackOff()
		if d == backoff.Stop {
			return err, false
		}
		if werr := r.conns.awaitConnected(ctx); werr != nil {
			return werr, false
		}
		wctx, cancel := r.life.Bind(ctx) // ends with ErrSessionClosed at Close
		werr := loop.Sleep(wctx, d)
		cancel()
		if werr != nil {
			return werr, false
		}
	}
}

// call runs one attempt of a request. go-zookeeper's calls are synchronous
// and know no context: a request to a server that stopped answering waits
// until the client gives up on the connection (2/3 of the session timeout,
// and up to ten times that while reconnecting to a frozen server). So unless
// ctx can never end, the request runs on a goroutine of its own and the
// caller stops waiting when ctx ends (or the session is closed); the request
// still completes in the background, and late (if set) gets its outcome.
func (r *requests) call(ctx context.Context, op func() error, late func(error)) error {
	err, _ := r.callLate(ctx, op, late)
	return err
}

// callLate is call that also reports whether the caller stopped waiting
// while the request was in flight (then late, if set, will be called). The
// request runs on one of the Session's workers; the hand-off below is
// pooled, so no goroutine and no channel is made per request.
func (r *requests) callLate(ctx context.Context, op func() error, late func(error)) (_ error, abandoned bool) {
	if ctx.Done() == nil {
		return op(), false
	}
	c := callPool.Get().(*pendingCall)
	c.state.Store(0)
	r.pool.run(func() {
		err := op()
		if c.state.CompareAndSwap(0, 1) {
			c.done <- err
			return
		}
		if late != nil {
			late(err)
		}
		callPool.Put(c) // the caller has left: c is ours
	})
	var cause error
	select {
	case err := <-c.done:
		callPool.Put(c)
		return err, false
	case <-ctx.Done():
		cause = context.Cause(ctx)
	case <-r.quit:
		cause = recipe.ErrSessionClosed
	}
	if c.state.CompareAndSwap(0, 2) {
		return cause, true
	}
	err := <-c.done
	callPool.Put(c)
	return err, false
}

// pendingCall is the hand-off between a caller of callLate and the worker
// running its request.
type pendingCall struct {
	state atomic.Int32 // 0: waited for, 1: answered, 2: abandoned
	done  chan error   // capacity 1
}

var callPool = sync.Pool{New: func() any { return &pendingCall{done: make(chan error, 1)} }}
