package k8snem

import (
	"context"
	"net"
	"sync"

	"k8s.io/client-go/rest"
)

// adminConns tracks the connections of the Target's admin client, so that
// EndRun can close them: client-go keeps an idle HTTP/2 connection (and
// its read loop) per API server it talked to, and one opened during a run
// (after a kill of the API server ended the previous one) would count as
// the run's leaked goroutine.
type adminConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// wrap returns a copy of cfg whose every connection is tracked.
func (a *adminConns) wrap(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	inner := c.Dial
	if inner == nil {
		var d net.Dialer
		inner = d.DialContext
	}
	c.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := inner(ctx, network, address)
		if err != nil {
			return nil, err
		}
		a.mu.Lock()
		if a.conns == nil {
			a.conns = map[net.Conn]struct{}{}
		}
		a.conns[conn] = struct{}{}
		a.mu.Unlock()
		return conn, nil
	}
	return c
}

// closeAll closes every tracked connection (the client dials anew when
// used again).
func (a *adminConns) closeAll() {
	a.mu.Lock()
	conns := a.conns
	a.conns = nil
	a.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}
