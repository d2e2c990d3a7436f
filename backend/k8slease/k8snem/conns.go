package k8snem

import (
	"context"
	"net"
	"net/http"
	"sync"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// adminConns tracks the connections of the Target's admin client, so that
// EndRun can close them: client-go keeps an idle HTTP/2 connection (and
// its read loop) per API server it talked to, and one opened during a run
// (after a kill of the API server ended the previous one) would count as
// the run's leaked goroutine.
type adminConns struct {
	rt    http.RoundTripper // the admin client's transport (set before use)
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
// used again). The transport closes its idle ones first, taking them out
// of its pool: a socket closed only behind its back stayed pooled for an
// instant, and a request written on it then failed ("use of closed
// network connection": Close's DeleteCollection right after EndRun).
func (a *adminConns) closeAll() {
	if a.rt != nil {
		utilnet.CloseIdleConnectionsFor(a.rt)
	}
	a.mu.Lock()
	conns := a.conns
	a.conns = nil
	a.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}
