package redislock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The errors of Connect, NewSession and the acquisitions are classified as
// on every backend (internal/connerr, docs/backends.md "Errors at
// connect"): a refused password or user (WRONGPASS, NOAUTH) or client
// certificate matches recipe.ErrNoPermission; a server that can't be
// reached (a network error, a timeout, a server certificate that fails
// verification, a plain port where TLS was asked for, or the reverse)
// matches recipe.ErrUnreachable. Only what is added changes: the text and
// the wrapped errors (a *tls.CertificateVerificationError among them) stay.

// credentialRefusals are the prefixes of the server's answers that refuse
// the client's credentials: a wrong password or unknown user, and no AUTH
// where the default user is off or has a password.
var credentialRefusals = []string{"WRONGPASS", "NOAUTH"}

// classify marks err, an error of a request sent within ctx (nil: none),
// with the sentinel of its kind; an error after ctx ended is left as it
// is (the caller answers with ctx's cause).
func classify(ctx context.Context, err error) error {
	var re redis.Error
	switch {
	case err == nil || ctx != nil && ended(ctx):
		return err
	case errors.As(err, &re) && refusesCredentials(re.Error()):
		return connerr.Mark(err, recipe.ErrNoPermission)
	case connerr.KindOf(err) != connerr.Other:
		return connerr.MarkTLS(err)
	case isNetError(err):
		return connerr.Mark(err, recipe.ErrUnreachable)
	}
	return err
}

// refusesCredentials reports whether a server's answer msg refuses the
// client's credentials.
func refusesCredentials(msg string) bool {
	for _, p := range credentialRefusals {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// tlsHint is the question of a TLS failure that a plain port may have
// caused.
const tlsHint = "is it the server's tls-port?"

// plainHint is the advice for a plaintext client that met a TLS port.
const plainHint = "use rediss:// or WithTLS"

// tlsProbeTimeout bounds the TLS hello of plainToTLS.
const tlsProbeTimeout = 2 * time.Second

// plainToTLS returns err with the advice to use TLS when cli, a plaintext
// client, met a connection closed without an answer (what a TLS-only
// port does to a plaintext client) and a TLS hello on a new connection
// is answered in TLS (connerr.SpeaksTLS); else err as it is.
func plainToTLS(ctx context.Context, cli *redis.Client, err error) error {
	o := cli.Options()
	if o.TLSConfig != nil || o.Dialer == nil || !(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) || ended(ctx) {
		return err
	}
	conn, derr := o.Dialer(ctx, o.Network, o.Addr)
	if derr != nil || !connerr.SpeaksTLS(ctx, conn, tlsProbeTimeout) {
		return err
	}
	return fmt.Errorf("%s closed the plaintext connection and speaks TLS (%s): %w", o.Addr, plainHint, err)
}
