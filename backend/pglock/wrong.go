package pglock

import (
	"context"
	"net"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// guard runs connect, ConnectConfig's first dial, under connerr.Guard: when
// every host of the configuration (its fallbacks included) answers in
// another protocol (an HTTP server, another lock service), Connect fails
// within about a second with a *connerr.WrongServerError
// (recipe.ErrWrongServer and recipe.ErrUnreachable) naming what answered,
// instead of waiting for the connect timeout. Every configuration is
// guarded, TLS ones too: PostgreSQL's TLS starts with a plaintext request.
func (s *Session) guard(ctx context.Context, connect func(context.Context) error) error {
	dial := s.cfg.DialFunc
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	var targets []connerr.Target
	add := func(host string, port uint16) {
		network, addr := pgconn.NetworkAddress(host, port)
		name := addr
		if network == "tcp" {
			name = net.JoinHostPort(host, strconv.Itoa(int(port)))
		}
		if slices.ContainsFunc(targets, func(t connerr.Target) bool { return t.Addr == name }) {
			return // a fallback of the same host (sslmode=prefer: TLS, then not)
		}
		targets = append(targets, connerr.Target{Addr: name, Dial: func(ctx context.Context) (net.Conn, error) { return dial(ctx, network, addr) }})
	}
	add(s.cfg.Host, s.cfg.Port)
	for _, f := range s.cfg.Fallbacks {
		add(f.Host, f.Port)
	}
	err := connerr.Guard(ctx, connerr.PostgreSQL, targets, connect)
	if _, wrong := err.(*connerr.WrongServerError); wrong {
		return &recipe.OpError{Op: "connect", Err: err}
	}
	return err
}
