package redislock

import (
	"context"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// guard runs connect, Connect's first exchange with the server of ro,
// under connerr.Guard: a plaintext client that meets another protocol on
// the port (an HTTP server, another lock service) fails within about a
// second with a *connerr.WrongServerError (recipe.ErrWrongServer and
// recipe.ErrUnreachable) naming what answered, instead of a parse error or
// the dial timeout. TLS clients are not guarded: their handshake fails at
// once against a server that is not TLS (connerr.Handshake).
func guard(ctx context.Context, ro *redis.Options, c *config, connect func(context.Context) error) error {
	if ro.TLSConfig != nil {
		return connect(ctx)
	}
	dial := c.dialer
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	t := connerr.Target{Addr: ro.Addr, Dial: func(ctx context.Context) (net.Conn, error) { return dial(ctx, ro.Network, ro.Addr) }}
	err := connerr.Guard(ctx, connerr.Redis, []connerr.Target{t}, connect)
	if _, wrong := err.(*connerr.WrongServerError); wrong {
		return &recipe.OpError{Op: "connect", Err: err}
	}
	return err
}
