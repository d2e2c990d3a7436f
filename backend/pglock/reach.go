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
// the sentinel of its kind. A server's answer (a *pgconn.PgError) is
// classified by its SQLSTATE first (classifyAnswer): it is what the server
// said, whatever an earlier attempt of the dial (sslmode=prefer's TLS
// request, another host) met.
func classifyDial(err error, params map[string]string) error {
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe):
		return classifyAnswer(err, pe, params)
	case connerr.KindOf(err) != connerr.Other:
		return connerr.MarkTLS(err)
	case strings.Contains(err.Error(), errNoTLS):
		return connerr.Mark(fmt.Errorf("%w (the server does not do TLS: is its ssl setting on?)", err), recipe.ErrUnreachable)
	}
	return err
}

// classifyAnswer marks err, whose server answer is pe, by pe's SQLSTATE:
// refusedStates, recipe.ErrNoPermission (worded by connerr.Refusal); 3D000 (invalid_catalog_name: no
// such database) and 42704 for a parameter the connection string set (a
// misspelled sslmode=, which pgx sends to the server as a setting),
// recipe.ErrBadOption; 42704 for one of this package's session parameters
// (params), ErrOldServer; class 08 (connection exception) and 57P01-57P03
// (shutting down, starting up), recipe.ErrUnreachable.
func classifyAnswer(err error, pe *pgconn.PgError, params map[string]string) error {
	switch code := pe.Code; {
	case slices.Contains(refusedStates, code):
		return connerr.Refusal(err) // the same words on every backend
	case code == "3D000":
		return fmt.Errorf("%w: pglock: the connection string names a database the server does not have (check its name): %w", recipe.ErrBadOption, err)
	case code == "42704":
		name := unknownParam(pe.Message)
		if _, ours := params[name]; ours || name == "" {
			return fmt.Errorf("%w: the server does not know the session parameter %q: %w", ErrOldServer, name, err)
		}
		return fmt.Errorf("%w: pglock: the connection string sets %q, which is no connection option and no setting the server knows (misspelled?): %w", recipe.ErrBadOption, name, err)
	case strings.HasPrefix(code, "08"), code == "57P01", code == "57P02", code == "57P03":
		return &recipe.OpError{Op: "connect", Err: fmt.Errorf("%w: %w", recipe.ErrUnreachable, err)}
	}
	return err
}

// unknownParam returns the parameter named by the message of a 42704
// answer to a startup message (`unrecognized configuration parameter
// "sslmod"`), or "".
func unknownParam(msg string) string {
	i := strings.IndexByte(msg, '"')
	j := strings.LastIndexByte(msg, '"')
	if i < 0 || j <= i {
		return ""
	}
	return msg[i+1 : j]
}

// answerOnly returns err, a pgconn.ConnectError, with its text cut to the
// attempt the server answered (a *pgconn.PgError) when it holds one: with
// sslmode=prefer (the default) against a server without TLS, pgx's text
// also shows the refused TLS attempt before the server's answer, which is
// not what went wrong. errors.Is and errors.As still see all of err.
func answerOnly(err error) error {
	var ce *pgconn.ConnectError
	var multi interface{ Unwrap() []error }
	if !errors.As(err, &ce) || !errors.As(ce.Unwrap(), &multi) {
		return err
	}
	for _, e := range multi.Unwrap() {
		var pe *pgconn.PgError
		if errors.As(e, &pe) {
			prefix, _, _ := strings.Cut(ce.Error(), ":")
			return &answer{err: err, text: prefix + ": " + e.Error()}
		}
	}
	return err
}

// answer is answerOnly's error: err with another text.
type answer struct {
	err  error
	text string
}

func (a *answer) Error() string { return a.text }
func (a *answer) Unwrap() error { return a.err }
