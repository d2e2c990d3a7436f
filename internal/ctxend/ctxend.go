// Package ctxend tells whether a caller's context has ended, counting a
// deadline that has passed but whose timer has not yet marked the context
// done.
//
// An I/O call given the context's deadline (a dial, a socket read) can fail
// with a timeout a moment before the context's own timer fires; a caller
// that then asks ctx.Err() sees nil and reports the timeout as a connection
// failure, not as the end of its context, which is what recipe.Lock's
// contract promises.
package ctxend

import (
	"context"
	"time"
)

// Ended reports whether ctx is done or its deadline has passed.
func Ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// Cause returns context.Cause(ctx) for a ctx that Ended: it waits for
// ctx's Done channel, which a passed deadline closes at once.
func Cause(ctx context.Context) error {
	<-ctx.Done()
	return context.Cause(ctx)
}

// Also returns a context done when ctx or other is, with the cause of
// whichever ended first (a Session's close, a lost lease), and its cancel.
func Also(ctx, other context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(other, func() { cancel(context.Cause(other)) })
	return c, func() { stop(); cancel(context.Canceled) }
}
