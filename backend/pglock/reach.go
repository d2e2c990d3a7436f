package pglock

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The errors of a lock connection's dial (Connect's and every
// acquisition's) are classified as on every backend (internal/connerr,
// docs/backends.md "Errors at connect"): a refused password, role or
// client certificate matches recipe.ErrNoPermission; a server that can't
// be reached, a server certificate that fails verification and a server
// that refuses TLS where WithTLS or sslmode asks for it match
// recipe.ErrUnreachable. The text and the wrapped errors (a
// *pgconn.ConnectError, a *pgconn.PgError, a
// *tls.CertificateVerificationError) stay.

// refusedStates are the SQLSTATEs by which a server refuses a connection's
// credentials: invalid_authorization_specification (no pg_hba.conf line
// lets the role in: an unknown role, no client certificate where one is
// required, no TLS where only TLS is allowed), invalid_password, and
// insufficient_privilege (no CONNECT on the database).
var refusedStates = []string{"28000", "28P01", "42501"}

// errNoTLS is pgconn's text for a server that answered the TLS request
// with "no".
const errNoTLS = "server refused TLS connection"

// classifyDial marks err, a failed dial's error (scrubbed already), with
// the sentinel of its kind.
func classifyDial(err error) error {
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && slices.Contains(refusedStates, pe.Code):
		return connerr.Mark(err, recipe.ErrNoPermission)
	case connerr.KindOf(err) != connerr.Other:
		return connerr.MarkTLS(err)
	case strings.Contains(err.Error(), errNoTLS):
		return connerr.Mark(fmt.Errorf("%w (the server does not do TLS: is its ssl setting on?)", err), recipe.ErrUnreachable)
	}
	return err
}
