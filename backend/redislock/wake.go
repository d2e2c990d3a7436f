package redislock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/internal/loop"
)

// wakeups is a Session's one pub/sub connection, shared by all its waiting
// Acquire calls: each subscribes to a channel of its own (its owner's) and
// is woken through it when a release hands it the lock. The connection is
// opened at the first wait and closed by Session.Close; go-redis dials it
// again after a failure and subscribes every channel again, and each
// confirmation that comes then wakes its waiter, which checks the lock
// again: a hand-off that skipped it while it was not subscribed (see
// handoffLua) is noticed then.
type wakeups struct {
	s *Session

	mu     sync.Mutex
	ps     *redis.PubSub   // nil until the first subscription
	subs   map[string]*sub // by channel
	closed bool
	stop   context.CancelFunc
	done   chan struct{}  // closed when run returns
	unsubs sync.WaitGroup // UNSUBSCRIBEs in flight
}

// sub is one waiter's subscription.
type sub struct {
	channel string
	wake    chan struct{} // a message or a confirmation
	ready   chan struct{} // closed at the first confirmation or refusal
	err     error         // the refusal (a *PermissionError), set before ready is closed
}

// confirmed reports whether the server confirmed the subscription: from
// then on, every PUBLISH to its channel reaches the waiter (unless the
// connection drops, after which it is confirmed again).
func (b *sub) confirmed() bool {
	select {
	case <-b.ready:
		return b.err == nil
	default:
		return false
	}
}

// subscribe sends SUBSCRIBE for channel and waits until the server has
// confirmed it, for at most wait (or until ctx ends). Without a
// confirmation by then the waiter goes on without one: it does not queue
// (try with enqueue false) until the confirmation comes, and checks again
// when it does. The error is a *PermissionError if the server refused the
// subscription, errClosed after Close, else nil.
func (h *wakeups) subscribe(ctx context.Context, channel string, wait time.Duration) (*sub, error) {
	b := &sub{channel: channel, wake: make(chan struct{}, 1), ready: make(chan struct{})}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errClosed
	}
	if h.ps == nil {
		h.ps = h.s.cli.Subscribe(context.Background())
		rctx, stop := context.WithCancel(context.Background())
		h.stop, h.done = stop, make(chan struct{})
		go h.run(rctx, h.ps)
	}
	h.subs[channel] = b
	ps := h.ps
	h.mu.Unlock()

	sctx, cancel := context.WithTimeout(ctx, wait)
	err := ps.Subscribe(sctx, channel)
	cancel()
	if err != nil { // a write error: go-redis dials again and subscribes then
		h.s.log.Debug("redislock: subscribing failed; waiting for the connection to come back", "err", err)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-b.ready:
		if b.err != nil {
			h.unsubscribe(b)
			return nil, b.err
		}
		select {
		case <-b.wake: // the confirmation's own: the caller tries next anyway
		default:
		}
	case <-t.C:
	case <-ctx.Done():
	}
	return b, nil
}

// unsubscribe ends b's subscription: at once for its waiter, and with an
// UNSUBSCRIBE sent in the background (which, with the connection down,
// would wait for a dial). Best effort: the owner has left the queue (see
// releaseScript), so a channel left subscribed matters only if that failed
// too; a hand-off to the owner then expires within the TTL.
func (h *wakeups) unsubscribe(b *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[b.channel] == b {
		delete(h.subs, b.channel)
	}
	if h.ps == nil || h.closed {
		return
	}
	ps := h.ps
	h.unsubs.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout(h.s.ttl))
		_ = ps.Unsubscribe(ctx, b.channel)
		cancel()
	})
}

// run reads the connection until Close: it wakes the waiter of every
// message and every confirmation (the first also readies it).
// A refusal of the server's ACL fails every subscription not yet
// confirmed and is logged at ERROR; a connection failure is logged once
// per run of failures, and retried with backoff.
func (h *wakeups) run(ctx context.Context, ps *redis.PubSub) {
	defer close(h.done)
	b := loop.BackOff(50*time.Millisecond, time.Second)
	failing := false
	for {
		msg, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		perr := h.s.permissionError(err, "SUBSCRIBE")
		switch {
		case err == nil:
			b.Reset()
			if failing {
				h.s.log.Info("redislock: the pub/sub connection is back")
				failing = false
			}
			h.deliver(msg)
		case perr != nil:
			h.s.log.Error("redislock: the server refused a subscription; waiters are woken only by their fallback re-check", "err", perr)
			h.refuse(perr)
		case errors.As(err, new(redis.Error)):
			h.s.log.Warn("redislock: unexpected answer on the pub/sub connection", "err", err)
		default:
			if !failing {
				h.s.log.Warn("redislock: the pub/sub connection failed; reconnecting (waiters re-check the lock at the holder's expiry meanwhile)", "err", err)
				failing = true
			}
			if loop.Pause(ctx, b, time.Second) != nil {
				return
			}
		}
	}
}

// deliver routes a message or confirmation to its waiter.
func (h *wakeups) deliver(msg any) {
	var channel string
	first := false
	switch m := msg.(type) {
	case *redis.Message:
		channel = m.Channel
	case *redis.Subscription:
		if m.Kind != "subscribe" {
			return
		}
		channel, first = m.Channel, true
	default:
		return
	}
	h.mu.Lock()
	b := h.subs[channel]
	h.mu.Unlock()
	if b == nil {
		return
	}
	if first {
		select {
		case <-b.ready:
		default:
			close(b.ready)
		}
	}
	select {
	case b.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// refuse fails every subscription not yet confirmed with err and wakes the
// others (their waiters check the lock again).
func (h *wakeups) refuse(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.subs {
		select {
		case <-b.ready:
			select {
			case b.wake <- struct{}{}:
			default:
			}
		default:
			b.err = err
			close(b.ready)
		}
	}
}

// close closes the connection and waits for run and the UNSUBSCRIBEs in
// flight to return. Later subscriptions fail with errClosed.
func (h *wakeups) close() {
	h.mu.Lock()
	h.closed = true
	ps, stop, done := h.ps, h.stop, h.done
	h.mu.Unlock()
	h.unsubs.Wait()
	if ps == nil {
		return
	}
	stop()
	_ = ps.Close()
	<-done
}
