package recipe

import "errors"

// ErrWrongServer is matched, beside ErrUnreachable, by Connect's error when
// every server address answered in another protocol than the backend's (an
// HTTP server, another lock service, an SSH server on the port): a wrong
// address or port, which no retry mends. The message names what answered
// (docs/backends.md, "Errors at connect").
var ErrWrongServer = errors.New("recipe: not the expected server")
