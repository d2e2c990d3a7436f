package zookeeper

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/internal/tlsconf"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// WithTLS makes every connection to the servers TLS (give Connect their
// secureClientPorts), with a clone of cfg taken at Connect; cfg == nil means
// the system's roots and no client certificate. The server's certificate is
// verified against cfg.RootCAs, for cfg.ServerName or else for the host of
// each server entry as given; a client certificate is presented as
// crypto/tls does. TLS 1.2 at least: a MaxVersion below it, or
// InsecureSkipVerify without cfg.VerifyConnection or VerifyPeerCertificate,
// is refused (recipe.ErrBadOption). Failed handshakes make Connect's
// recipe.ErrUnreachable, matching recipe.ErrNoPermission when a server
// refused the client's certificate (docs/backends/zookeeper.md#tls).
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) {
		if cfg == nil {
			cfg = &tls.Config{} // TLS on, with the defaults
		}
		c.tls = cfg
	}
}

// prepareTLS checks WithTLS's configuration and replaces it with the clone
// the Session uses: the rule every backend's WithTLS follows
// (internal/tlsconf).
func prepareTLS(c *config) error {
	if c.tls == nil {
		return nil
	}
	if err := tlsconf.Check(c.tls); err != nil {
		return fmt.Errorf("%w: WithTLS: %w", recipe.ErrBadOption, err)
	}
	c.tls = tlsconf.Clone(c.tls)
	return nil
}

// handshake runs TLS over raw, a connection to addr (a resolved
// host:port), and returns the TLS connection; raw is closed on failure.
// The handshake ends early when the Session closes.
func (s *Session) handshake(raw net.Conn, addr string, timeout time.Duration) (net.Conn, error) {
	cfg := tlsconf.ForHost(s.cfg.tls, s.hosts.name(addr))
	c := tls.Client(raw, cfg)
	ctx, cancel := context.WithTimeout(s.life.Context(), max(timeout, s.wire.sessionTimeout()))
	defer cancel()
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, tlsFailure(addr, cfg, err)
	}
	return c, nil
}

// tlsRejected marks a TLS failure no retry mends while the configuration
// stays as it is: a refusal, for Connect's dial watch.
type tlsRejected struct{ err error }

func (r tlsRejected) Error() string { return r.err.Error() }
func (r tlsRejected) Unwrap() error { return r.err }

// rejected reports whether err is a TLS failure marked tlsRejected.
func rejected(err error) bool { return errors.As(err, new(tlsRejected)) }

// secureHint is the question of a TLS failure that a plain port may have
// caused.
const secureHint = "is it the server's secureClientPort?"

// tlsFailure describes a TLS failure err on a connection to addr: in the
// handshake, or (TLS 1.3, whose client finishes before the server has
// checked its certificate) on the first read, as every backend does
// (internal/connerr). Failures that a retry would meet again are marked
// tlsRejected.
func tlsFailure(addr string, cfg *tls.Config, err error) error {
	err, final := connerr.Handshake(err, addr, cfg, secureHint)
	if final {
		return tlsRejected{err}
	}
	return err
}

// namedHosts is the HostProvider of a Session with TLS: go-zookeeper's
// DNSHostProvider, given addresses resolved here, so that the host name
// each address came from is known: go-zookeeper gives dialers resolved
// addresses only, and the certificate must be checked for the name.
type namedHosts struct {
	*zk.DNSHostProvider
	mu    sync.Mutex
	names map[string]string // resolved host:port -> the host as given (the first one, if two resolve alike)
}

// hostProvider returns the HostProvider for Connect: namedHosts with TLS,
// else go-zookeeper's DNSHostProvider.
func (s *Session) hostProvider() zk.HostProvider {
	if s.cfg.tls == nil {
		return zk.NewDNSHostProvider()
	}
	s.hosts = &namedHosts{DNSHostProvider: zk.NewDNSHostProvider()}
	return s.hosts
}

// lookupTimeout bounds namedHosts' resolution, as go-zookeeper's own.
const lookupTimeout = 3 * time.Second

// Init resolves servers (host:port each) and hands the addresses to the
// DNSHostProvider.
func (h *namedHosts) Init(servers []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	names := make(map[string]string)
	var found []string
	for _, server := range servers {
		host, port, err := net.SplitHostPort(server)
		if err != nil {
			return err
		}
		addrs, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			hp := net.JoinHostPort(a, port)
			if _, dup := names[hp]; !dup {
				names[hp] = host
			}
			found = append(found, hp)
		}
	}
	h.mu.Lock()
	h.names = names
	h.mu.Unlock()
	return h.DNSHostProvider.Init(found)
}

// name returns the host addr was resolved from (addr's own host if none).
func (h *namedHosts) name(addr string) string {
	h.mu.Lock()
	n, ok := h.names[addr]
	h.mu.Unlock()
	if ok {
		return n
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}
