package etcdlock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/internal/tlsconf"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// WithTLS makes Connect speak TLS to every endpoint, with a copy of cfg
// (nil: the system's roots, no client certificate), also for an etcd://
// URL: a Session asked for TLS never talks in plaintext. Each endpoint's
// certificate is verified against its host unless cfg.ServerName names
// another; a configuration that would not verify the server, or a
// MaxVersion below TLS 1.2, is refused (recipe.ErrBadOption). Connect
// only: NewSession refuses it (see TLS in the package documentation).
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) {
		c.tls, c.tlsSet = cfg, true
		c.connectOnly = append(c.connectOnly, "WithTLS")
	}
}

// tlsScheme is the URL scheme of a TLS connection with the system's roots.
const tlsScheme = "etcds://"

// cutScheme cuts etcd:// or etcds:// off raw.
func cutScheme(raw string) (rest string, ok bool) {
	if rest, ok = strings.CutPrefix(raw, tlsScheme); ok {
		return rest, true
	}
	return strings.CutPrefix(raw, "etcd://")
}

// clientTLS returns the TLS configuration of a Connect to url, nil for a
// plain connection, or an error matching recipe.ErrBadOption for a
// configuration that would not verify the server.
func (c *config) clientTLS(url string) (*tls.Config, error) {
	if !c.tlsSet && !strings.HasPrefix(url, tlsScheme) {
		return nil, nil
	}
	if err := tlsconf.Check(c.tls); err != nil {
		return nil, fmt.Errorf("%w: WithTLS: %w", recipe.ErrBadOption, err)
	}
	return tlsconf.Clone(c.tls), nil
}

// http2Preface is what an HTTP/2 client sends first: the connection
// preface and an empty SETTINGS frame.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + "\x00\x00\x00\x04\x00\x00\x00\x00\x00"

// tlsHint is the question of a TLS failure that a plain endpoint may have
// caused.
const tlsHint = "is it a TLS client URL of the server (https://, --cert-file)?"

// handshake runs TLS on conn, a fresh connection to ep (host:port), and
// waits for the server's first answer, so that a refusal is reported at
// once with its reason: gRPC would only retry until the connect timeout and
// report that. A server certificate that fails verification fails the
// handshake; a client certificate the server refuses comes back as an alert
// on the first read (in TLS 1.3 the client's handshake ends before the
// server has checked it). Any answer (etcd's SETTINGS frame, an HTTP/1.1
// error) or a plain close counts as accepted. Failures are classified as
// on every backend (connerr.Handshake): recipe.ErrNoPermission for a
// refused client certificate, recipe.ErrUnreachable for the rest.
func handshake(ctx context.Context, conn net.Conn, ep string, cfg *tls.Config) error {
	host, _, err := net.SplitHostPort(ep)
	if err != nil {
		return err
	}
	cfg = tlsconf.ForHost(cfg, host)
	tc := tls.Client(conn, cfg)
	defer tc.Close()
	if err := tc.HandshakeContext(ctx); err != nil {
		err, _ = connerr.Handshake(err, ep, cfg, tlsHint)
		return err
	}
	if _, err := firstAnswer(ctx, tc); err != nil && !errors.Is(err, io.EOF) {
		if connerr.KindOf(err) != connerr.Other {
			err, _ = connerr.Handshake(err, ep, cfg, tlsHint)
		}
		return fmt.Errorf("TLS session with %s: %w", ep, err)
	}
	return nil
}

// firstAnswer sends conn the HTTP/2 preface and returns the first byte of
// the answer, read within ctx.
func firstAnswer(ctx context.Context, conn net.Conn) (byte, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	var b [1]byte
	_, err := conn.Write([]byte(http2Preface))
	if err == nil {
		_, err = io.ReadFull(conn, b[:])
	}
	return b[0], err
}

// plainHint is the advice for a plaintext client that met a TLS endpoint.
const plainHint = "use etcds:// or WithTLS"

// plainAnswer is probe's check of a plaintext connection to ep, so that a
// TLS endpoint is reported at once with the advice to use TLS (gRPC would
// retry until the connect timeout and report "context deadline
// exceeded"): the HTTP/2 preface answered by a TLS alert, or a connection
// closed without an answer where a TLS client hello on a second
// connection is answered in TLS, fails with that advice (probe makes it
// ErrUnreachable). Any other answer, or none, counts as accepted, as a plain TCP
// connection did before.
func plainAnswer(ctx context.Context, conn net.Conn, ep string, dial func(context.Context, string) (net.Conn, error)) error {
	b, err := firstAnswer(ctx, conn)
	switch {
	case err == nil && b == tlsAlert:
		return fmt.Errorf("%s answered in TLS (%s)", ep, plainHint)
	case !errors.Is(err, io.EOF):
		return nil
	}
	c, err := dial(ctx, ep)
	if err == nil && connerr.SpeaksTLS(ctx, c, tlsProbeTimeout) {
		return fmt.Errorf("%s closed the plaintext connection and speaks TLS (%s)", ep, plainHint)
	}
	return nil
}

// tlsAlert is the first byte of a TLS alert record.
const tlsAlert = 0x15

// tlsProbeTimeout bounds plainAnswer's TLS hello.
const tlsProbeTimeout = 2 * time.Second
