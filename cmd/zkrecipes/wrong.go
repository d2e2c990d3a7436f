package main

import (
	"errors"
	"log/slog"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// wrongServerStatus logs a Connect that met another protocol at every
// address of --servers (recipe.ErrWrongServer: the error names what
// answered, e.g. an HTTP server) and returns exit 69, as for a server not
// reached; ok is false for any other error.
func wrongServerStatus(log *slog.Logger, b backend, servers string, err error) (status int, ok bool) {
	if !errors.Is(err, recipe.ErrWrongServer) {
		return 0, false
	}
	log.Error("no "+string(b)+" server at --servers: another server answered there (check the address and port)",
		"servers", redact(servers), "err", err)
	return exitUnavailable, true
}
