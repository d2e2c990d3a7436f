package etcdlock

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// guard runs connect, Connect's first exchange with endpoints, under
// connerr.Guard: a plaintext client whose every endpoint answers in another
// protocol (an HTTP server, another lock service) fails within about a
// second with a *connerr.WrongServerError (recipe.ErrWrongServer and
// ErrUnreachable) naming what answered, instead of gRPC retrying until the
// connect timeout. TLS clients are not guarded: their handshake fails at
// once against a server that is not TLS (connerr.Handshake).
func guard(ctx context.Context, endpoints []string, dial func(context.Context, string) (net.Conn, error), tlsCfg *tls.Config, connect func(context.Context) error) error {
	if tlsCfg != nil {
		return connect(ctx)
	}
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	targets := make([]connerr.Target, len(endpoints))
	for i, ep := range endpoints {
		targets[i] = connerr.Target{Addr: ep, Dial: func(ctx context.Context) (net.Conn, error) { return dial(ctx, ep) }}
	}
	err := connerr.Guard(ctx, connerr.Etcd, targets, connect)
	if _, wrong := err.(*connerr.WrongServerError); wrong {
		return &recipe.OpError{Op: "connect", Err: fmt.Errorf("%w: %w", ErrUnreachable, err)}
	}
	return err
}
