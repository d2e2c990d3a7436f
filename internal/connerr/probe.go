package connerr

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"
)

// errSpeaksTLS ends SpeaksTLS's handshake once the server has shown it
// speaks TLS.
var errSpeaksTLS = errors.New("connerr: the server speaks TLS")

// SpeaksTLS reports whether the server at the other end of conn, a fresh
// connection, answers a TLS client hello in TLS: for a backend whose
// plaintext client met a connection closed at once, to tell a TLS-only
// port (which closes a plaintext client without a word) from a server that
// is down behind a proxy, and so to fail at once with the right hint
// instead of retrying. The handshake is abandoned as soon as the server's
// certificate arrives (nothing is verified, nothing is sent after the
// hello); a TLS alert counts as TLS too. It closes conn, and gives up when
// ctx ends or after timeout.
func SpeaksTLS(ctx context.Context, conn net.Conn, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tc := tls.Client(conn, &tls.Config{
		// Not a connection to use: only its first answer is read.
		InsecureSkipVerify: true,
		VerifyConnection:   func(tls.ConnectionState) error { return errSpeaksTLS },
	})
	defer tc.Close()
	err := tc.HandshakeContext(ctx)
	var oerr *net.OpError
	return errors.Is(err, errSpeaksTLS) || errors.As(err, &oerr) && oerr.Op == "remote error"
}
