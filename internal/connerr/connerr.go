// Package connerr is the one classification of the failures of connecting
// to a lock service, which every backend applies where its Connect,
// NewSession and acquisitions return them, so that one sentinel means the
// same everywhere (docs/backends.md, "Errors at connect"):
//
//   - the server refused our credentials (a password, a user, a client
//     certificate, none given where one is needed): recipe.ErrNoPermission;
//   - the server could not be reached as asked (refused, timed out, a name
//     that does not resolve, a server certificate that is not trusted, an
//     answer that is not TLS where TLS was asked for, or the reverse):
//     recipe.ErrUnreachable, with the cause (a
//     *tls.CertificateVerificationError among them) still in the chain.
//
// The drivers' own errors differ per backend; what each backend's code for
// a refused credential is (an SQLSTATE, a Redis error prefix, an etcd
// error) stays in the backend, which marks it with Mark. The TLS failures
// are the same in every backend and are classified here, once.
package connerr

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"

	"github.com/zkrecipes/zkrecipes/internal/tlsconf"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Mark returns err with sentinel added to what errors.Is matches: its text,
// and what errors.As finds in it, stay err's. It returns err itself when
// err is nil or matches sentinel already.
func Mark(err, sentinel error) error {
	if err == nil || errors.Is(err, sentinel) {
		return err
	}
	return &marked{err: err, also: sentinel}
}

// marked is err, also matching another sentinel.
type marked struct{ err, also error }

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.err, m.also} }

// Kind is the kind of a TLS failure.
type Kind int

// The kinds of TLS failure, as KindOf tells them apart.
const (
	// Other is an error that holds none of the failures below (a reset, a
	// timeout, a plain network error): the caller classifies it as it
	// would without TLS.
	Other Kind = iota
	// Untrusted: the server's certificate failed verification (a
	// *tls.CertificateVerificationError). recipe.ErrUnreachable.
	Untrusted
	// Refused: the server refused the client's certificate, or wanted one
	// and got none (a TLS alert such as "bad certificate" or "certificate
	// required"). recipe.ErrNoPermission.
	Refused
	// Ended: the server ended the handshake with another TLS alert (no
	// common version or cipher, an internal error). recipe.ErrUnreachable.
	Ended
	// NotTLS: the server answered with something that is not TLS (a
	// tls.RecordHeaderError: "first record does not look like a TLS
	// handshake"), a plaintext port. recipe.ErrUnreachable.
	NotTLS
)

// certificateAlerts are the texts of the TLS alerts by which a server
// refuses the client's certificate (crypto/tls's names). decrypt_error
// ("error decrypting message") is what OpenSSL (Redis, PostgreSQL) sends
// for a certificate whose signature fails against the authority it names:
// one of another authority with the same name; crypto/tls's client never
// sends a handshake signature the server could not check otherwise.
var certificateAlerts = []string{"bad certificate", "unsupported certificate", "revoked certificate",
	"expired certificate", "unknown certificate", "unknown certificate authority", "access denied",
	"certificate required", "error decrypting message"}

// handshakeFailure is the alert of a TLS 1.2 server (OpenSSL's) that
// wanted a client certificate and got none, and also of one that shares no
// cipher or group with us: only a tlsconf.Request tells them apart.
const handshakeFailure = "handshake failure"

// KindOf tells which TLS failure err holds, if any.
func KindOf(err error) Kind {
	var verr *tls.CertificateVerificationError
	var rerr tls.RecordHeaderError
	var oerr *net.OpError
	switch {
	case err == nil:
		return Other
	case errors.As(err, &verr):
		return Untrusted
	case errors.As(err, &rerr):
		return NotTLS
	case errors.As(err, &oerr) && oerr.Op == "remote error":
		if slices.Contains(certificateAlerts, alertOf(oerr)) {
			return Refused
		}
		return Ended
	}
	return Other
}

// alertOf is the name of the TLS alert of oerr, a "remote error".
func alertOf(oerr *net.OpError) string {
	return strings.TrimPrefix(oerr.Err.Error(), "tls: ")
}

// kindAfter is KindOf(err), but Refused for a handshake_failure alert
// after the server asked for a client certificate and none was sent (req).
func kindAfter(err error, req *tlsconf.Request) Kind {
	k := KindOf(err)
	var oerr *net.OpError
	if k == Ended && req.Asked() && !req.Sent() && errors.As(err, &oerr) && alertOf(oerr) == handshakeFailure {
		return Refused
	}
	return k
}

// Sentinel returns the recipe sentinel of a kind: recipe.ErrNoPermission
// for Refused, recipe.ErrUnreachable for the other TLS failures, nil for
// Other.
func (k Kind) Sentinel() error {
	switch k {
	case Refused:
		return recipe.ErrNoPermission
	case Untrusted, Ended, NotTLS:
		return recipe.ErrUnreachable
	}
	return nil
}

// MarkTLS returns err marked (Mark) with the sentinel of the TLS failure it
// holds, or err as it is when it holds none: for the errors of a driver
// that runs TLS itself (pgx, go-redis), at the boundary where the backend
// returns them.
func MarkTLS(err error) error {
	if s := KindOf(err).Sentinel(); s != nil {
		return Mark(err, s)
	}
	return err
}

// Handshake describes err, the failure of a TLS handshake with addr made
// with cfg, or of the first read after it (where TLS 1.3 reports a
// refused client certificate: its client finishes before the server has
// checked it), and marks it with the sentinel of its kind. hint is the
// backend's question for a server that may not speak TLS on that port
// ("is it the server's tls-port?"). final reports a failure that a retry
// with the same configuration meets again (every kind but Other); a
// connection closed during the handshake, or a handshake that timed out,
// is described with hint and matches recipe.ErrUnreachable, but is not
// final (a starting server closes connections too).
func Handshake(err error, addr string, cfg *tls.Config, hint string) (described error, final bool) {
	return describe(err, KindOf(err), addr, noCertificate(cfg), hint)
}

// HandshakeTracked is Handshake for a handshake made with the
// configuration of tlsconf.Track, whose req tells what the server asked:
// a handshake_failure alert after a request for a client certificate that
// was answered with none is a refusal (recipe.ErrNoPermission, "none was
// presented"), which Handshake alone can't tell from a server with no
// cipher in common.
func HandshakeTracked(err error, addr string, req *tlsconf.Request, hint string) (described error, final bool) {
	none := ""
	if req.Asked() && !req.Sent() {
		none = noneWasPresented
	}
	return describe(err, kindAfter(err, req), addr, none, hint)
}

// describe is Handshake's description of err, of kind k; none is said of
// a refusal.
func describe(err error, k Kind, addr, none, hint string) (described error, final bool) {
	switch k {
	case Untrusted:
		return Mark(fmt.Errorf("the certificate of %s failed verification: %w", addr, err), recipe.ErrUnreachable), true
	case NotTLS:
		return Mark(fmt.Errorf("%s does not speak TLS (%s): %w", addr, hint, err), recipe.ErrUnreachable), true
	case Refused:
		return Mark(fmt.Errorf("%s refused the client certificate%s: %w", addr, none, err), recipe.ErrNoPermission), true
	case Ended:
		return Mark(fmt.Errorf("%s ended the TLS handshake: %w", addr, err), recipe.ErrUnreachable), true
	}
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		// Also what many plain ports do (they read the TLS hello as a
		// malformed request and hang up).
		return Mark(fmt.Errorf("%s closed the connection in the TLS handshake (%s): %w", addr, hint, err), recipe.ErrUnreachable), false
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		// A plain port that waits for more of what it takes for a request.
		return Mark(fmt.Errorf("no TLS answer from %s in time (%s): %w", addr, hint, err), recipe.ErrUnreachable), false
	}
	return fmt.Errorf("TLS handshake with %s: %w", addr, err), false
}

// noneWasPresented is said of a refusal when no certificate was sent.
const noneWasPresented = " (none was presented)"

// noCertificate says so when cfg presents no client certificate.
func noCertificate(cfg *tls.Config) string {
	if cfg == nil || len(cfg.Certificates) == 0 && cfg.GetClientCertificate == nil {
		return noneWasPresented
	}
	return ""
}
