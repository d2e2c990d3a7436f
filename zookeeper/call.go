package zookeeper

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
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
// op sends: over defaultMaxPacket, op is not tried again once they lost
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
	return r.retryEach(ctx, sends, func() (error, bool) { return r.callLate(ctx, op, late) })
}

// retryOwn is retry for an op made of calls (owncall.go), which honour
// ctx themselves: op runs on the caller's goroutine.
func (r *requests) retryOwn(ctx context.Context, sends *lostSends, op func(ctx context.Context) error) error {
	err, _ := r.retryEach(ctx, sends, func() (error, bool) { return op(ctx), false })
	return err
}

// retryEach is the loop of retryLate and retryOwn around attempt.
func (r *requests) retryEach(ctx context.Context, sends *lostSends, attempt func() (error, bool)) (_ error, abandoned bool) {
	var b backoff.BackOff
	pause := time.Millisecond // between calls not sent (errNotConnected)
	for first := true; ; first = false {
		// The first attempt is made even on a done ctx: cleanup deletes rely
		// on it being sent.
		if err := ctx.Err(); err != nil && !first {
			return context.Cause(ctx), false
		}
		err, abandoned := attempt()
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
		if errors.Is(err, errNotConnected) {
			// A call not sent for want of a connection (go-zookeeper's
			// would have waited in its queue): sent again once connected,
			// spending none of the retry policy; the growing pause only
			// keeps a connection that is closing from making this spin.
			if werr := r.conns.awaitConnected(ctx); werr != nil {
				return werr, false
			}
			if werr := loop.SleepOr(ctx, pause, r.quit, recipe.ErrSessionClosed); werr != nil {
				return werr, false
			}
			pause = min(2*pause, 64*time.Millisecond)
			continue
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
		if werr := loop.SleepOr(ctx, d, r.quit, recipe.ErrSessionClosed); werr != nil {
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

// watch returns the connection state, a channel closed at its next
// change, and whether the Session is closed: one consistent reading.
func (c *connState) watch() (st recipe.ConnState, changed <-chan struct{}, closed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state, c.changed.C(), c.mu.closed
}

// awaitConnected blocks until the state is CONNECTED or RECONNECTED.
func (c *connState) awaitConnected(ctx context.Context) error {
	for {
		st, ch, closed := c.watch()
		if closed {
			return recipe.ErrSessionClosed
		}
		if st.IsConnected() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-c.quit:
			return recipe.ErrSessionClosed
		}
	}
}

// isConnErr reports whether err is a transient connection-level failure
// after which a request may or may not have been applied by the server:
// go-zookeeper's sentinels, and raw network errors (go-zookeeper hands a
// failed socket write to the waiting request as is).
func isConnErr(err error) bool {
	if err == nil {
		return false
	}
	var ne *net.OpError
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved) ||
		errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrClosedPipe) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// isClosing reports whether err means the client was closed.
func isClosing(err error) bool { return errors.Is(err, zk.ErrClosing) }

// Above the default limit, every retry of a connection loss
// (requests.retryLate, and the cleanup deletes) follows one rule:
//
//	A request over defaultMaxPacket whose connection was lost right after
//	it was sent, twice in a row, is not sent again.
//
// The servers may refuse such a request by dropping the connection (their
// jute.maxbuffer smaller than the Session was told), which the client
// cannot tell from a network failure. The operation fails with an error
// matching recipe.ErrTooLarge (tooLargeLost); the cleaner gives the delete up,
// logged at error level. What a request may weigh is known before it is
// sent (queueRequestSize, createSize, cleanupItem.sized). See
// docs/zookeeper-client.md#lost-sends-and-packet-limits.

// maxLostSends is how many times in a row a request over defaultMaxPacket
// may lose its connection right after it was sent.
const maxLostSends = 2

// lostAfterSend reports whether err is the loss of the connection a request
// had been sent on, before its reply came: not a request that was never
// sent (go-zookeeper's ErrNoServer for requests it flushed unsent,
// errNotConnected), nor the end of the session or of the client.
func lostAfterSend(err error) bool {
	return isConnErr(err) && !errors.Is(err, zk.ErrNoServer) && !errors.Is(err, errNotConnected) &&
		!errors.Is(err, zk.ErrSessionExpired) && !errors.Is(err, zk.ErrSessionMoved) && !isClosing(err)
}

// lostSends applies the rule above to one operation or cleanup delete.
type lostSends struct {
	size int // bounds its requests, in bytes
	lost int // attempts in a row whose connection was lost right after sending
}

// note records an attempt that failed with err (nil: succeeded), and
// returns the error that ends the operation when the rule says so (nil: it
// may be tried again).
func (c *lostSends) note(err error) error {
	if c.size <= defaultMaxPacket || !lostAfterSend(err) {
		return nil
	}
	if c.lost++; c.lost < maxLostSends {
		return nil
	}
	return tooLargeLost(c.size, err)
}

// tooLargeLost is the error of an operation whose requests of up to size
// bytes, over defaultMaxPacket, lost their connection right after they
// were sent maxLostSends times in a row (err: the last loss).
func tooLargeLost(size int, err error) error {
	return errorf("%w: the connection was lost right after a request of up to %d bytes was sent, %d times in a row: "+
		"not sent again, as the servers may refuse a request over their default limit of %d bytes by dropping the connection "+
		"(their jute.maxbuffer may be below the session's packet limit: see zookeeper.WithMaxPacket): %w",
		recipe.ErrTooLarge, size, maxLostSends, defaultMaxPacket, err)
}
