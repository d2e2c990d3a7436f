package pglock

import (
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/internal/userinfo"
)

// No password reaches an error of this package, wherever pgx took it from:
// the URL's user information or query (password, sslpassword), a
// keyword/value string (quoted or not), PGPASSWORD, or the password file.
// pgx redacts its own parse errors on a best-effort basis only (it shows
// "password = 'a b'" and the tail of an escaped quote), so the errors of
// its parsing and dialling are passed through userinfo's redaction here,
// at the boundary where this package returns them.

// badURL is Connect's error for a connection string pgx could not parse:
// ErrBadURL and pgx's error, with the string it quotes redacted
// (userinfo.Redact: its ConnString too, for a caller that reads it) and
// every password of the string and of PGPASSWORD scrubbed from the rest
// (its detail can quote a part of a misread string).
func badURL(raw string, err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		pe.ConnString = userinfo.Redact(pe.ConnString)
	}
	return fmt.Errorf("%w: %w", ErrBadURL, userinfo.Hide(err, append(userinfo.Secrets(raw), os.Getenv("PGPASSWORD"))...))
}

// hideConnect scrubs the passwords of raw (the string Connect was given)
// and of cfg (which pgx may have taken from PGPASSWORD or the password
// file) from an error of dialling with cfg. pgx's ConnectError keeps the
// Config it dialled with, password and all, where a struct walker (%#v of
// the wrapped error, go-spew, a debugger) finds it: it is given a copy with
// the password masked (its Error reads only User and Database; the copy
// shares the rest, which pgx's error never changes).
func hideConnect(err error, raw string, cfg *pgconn.Config) error {
	secrets := userinfo.Secrets(raw)
	if cfg != nil {
		secrets = append(secrets, cfg.Password)
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Config != nil && ce.Config.Password != "" {
		c := *ce.Config
		c.Password = userinfo.Mask
		ce.Config = &c
	}
	return userinfo.Hide(err, secrets...)
}
