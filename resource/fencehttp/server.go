package fencehttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/zkrecipes/zkrecipes/fence"
)

// Header names of the protocol.
const (
	// Header carries the request's fencing token, in decimal
	// (fence.Token.String, fence.ParseToken).
	Header = "Fencing-Token"
	// HighestHeader carries, on a 409 (code "stale"), the highest token
	// the resource had accepted.
	HighestHeader = "Fencing-Highest"
	// ErrorHeader carries the code of a refusal made by the wrapper (see
	// the package documentation); the handler's own responses lack it.
	ErrorHeader = "Fencing-Error"
)

// Defaults of the options.
const (
	// DefaultMaxRequest is the largest request body Handler reads before
	// taking the fence, in bytes.
	DefaultMaxRequest = 1 << 20
	// DefaultMaxResponse is the largest response Handler buffers, in bytes.
	DefaultMaxResponse = 1 << 20
)

// maxTokenLen is the length of the longest decimal token (2^64-1): longer
// header values are refused without parsing them.
const maxTokenLen = 20

// Option configures Handler.
type Option func(*config)

type config struct {
	maxRequest  int64
	maxResponse int
	log         *slog.Logger
}

// WithMaxRequest sets the largest request body read before the fence is
// taken (default DefaultMaxRequest; 0 or less: the default). A larger body
// is refused with 413, the handler not called.
func WithMaxRequest(n int64) Option { return func(c *config) { c.maxRequest = n } }

// WithMaxResponse sets the largest response the handler may write (default
// DefaultMaxResponse; 0 or less: the default). A larger one fails the
// write: the token is not recorded and the client gets 500.
func WithMaxResponse(n int) Option { return func(c *config) { c.maxResponse = n } }

// WithLogger sets where refusals (DEBUG for stale and bad input) and the
// fence's errors (ERROR) are logged (default slog.Default(); nil: none).
// Tokens and error texts are logged, request headers never.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// Handler returns a handler that runs next only through f.Admit, with the
// token of the request's Fencing-Token header, for the resource
// resource(r) names: next runs, and its response is sent, only if the
// token is not lower than the highest f accepted for that resource, and
// the token is recorded only if next answers with a status below 400. See
// the package documentation for what is atomic and for the refusals. In
// next, r.Context() is the context f.Admit gave the write (with
// fencesql, fencesql.TxFrom finds the transaction in it).
func Handler(f fence.Fence, resource func(*http.Request) string, next http.Handler, opts ...Option) http.Handler {
	c := config{maxRequest: DefaultMaxRequest, maxResponse: DefaultMaxResponse, log: slog.Default()}
	for _, o := range opts {
		o(&c)
	}
	if c.maxRequest <= 0 {
		c.maxRequest = DefaultMaxRequest
	}
	if c.maxResponse <= 0 {
		c.maxResponse = DefaultMaxResponse
	}
	return &handler{f: f, resource: resource, next: next, c: c}
}

type handler struct {
	f        fence.Fence
	resource func(*http.Request) string
	next     http.Handler
	c        config
}

// errRefused is the write's error when next answered 400 or above: its
// response is sent as it is, and nothing is recorded.
var errRefused = errors.New("fencehttp: the handler answered an error status")

// errTooLarge is the write's error when next's response overflowed.
var errTooLarge = errors.New("fencehttp: the handler's response is over the buffer's limit")

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, code := readToken(r.Header)
	if code != "" {
		h.debug(r, "refused: bad token header", "code", code)
		refuse(w, http.StatusBadRequest, code)
		return
	}
	name := h.resource(r)
	if err := fence.CheckResource(name); err != nil {
		h.debug(r, "refused: bad resource", "err", err)
		refuse(w, http.StatusBadRequest, "bad-resource")
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.c.maxRequest))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			refuse(w, http.StatusRequestEntityTooLarge, "too-large")
			return
		case err != nil: // the client went away or sent garbage
			refuse(w, http.StatusBadRequest, "bad-body")
			return
		}
		r.Body.Close()
		r = r.Clone(r.Context()) // r itself belongs to the server
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	rec := newRecorder(h.c.maxResponse)
	err := h.f.Admit(r.Context(), name, tok, func(ctx context.Context) error {
		h.next.ServeHTTP(rec, r.WithContext(ctx))
		switch {
		case rec.over:
			return errTooLarge
		case rec.code() >= 400:
			return errRefused
		}
		return nil
	})
	h.answer(w, r, rec, tok, err)
}

// answer sends next's response or the refusal that err calls for.
func (h *handler) answer(w http.ResponseWriter, r *http.Request, rec *recorder, tok fence.Token, err error) {
	var stale *fence.StaleError
	switch {
	case err == nil || errors.Is(err, errRefused):
		rec.send(w)
	case errors.As(err, &stale):
		h.debug(r, "refused: stale token", "token", tok, "highest", stale.Highest)
		w.Header().Set(HighestHeader, stale.Highest.String())
		refuse(w, http.StatusConflict, "stale")
	case errors.Is(err, fence.ErrUncertain):
		h.error(r, "the fence's answer was lost: the write may have landed", tok, err)
		refuse(w, http.StatusInternalServerError, "uncertain")
	case errors.Is(err, fence.ErrBadResource):
		h.debug(r, "refused: the fence refuses the resource name", "err", err)
		refuse(w, http.StatusBadRequest, "bad-resource")
	case errors.Is(err, fence.ErrNoToken), errors.Is(err, fence.ErrTokenOverflow):
		refuse(w, http.StatusBadRequest, "bad-token") // readToken refuses these first
	case r.Context().Err() != nil:
		h.debug(r, "the request ended before the write", "err", err)
		refuse(w, http.StatusServiceUnavailable, "unavailable")
	default:
		h.error(r, "fenced write failed", tok, err)
		refuse(w, http.StatusInternalServerError, "internal")
	}
}

// readToken returns the request's token, or the code of its refusal.
func readToken(hd http.Header) (fence.Token, string) {
	vals := hd.Values(Header)
	switch {
	case len(vals) == 0 || vals[0] == "":
		return 0, "no-token"
	case len(vals) > 1 || len(vals[0]) > maxTokenLen:
		return 0, "bad-token" // two tokens: which one would an intermediary pass on?
	case vals[0] == "0":
		return 0, "no-token"
	}
	t, err := fence.ParseToken(vals[0])
	if err != nil || fence.CheckToken(t) != nil {
		return 0, "bad-token"
	}
	return t, ""
}

// refuse writes one of the wrapper's own answers.
func refuse(w http.ResponseWriter, status int, code string) {
	hd := w.Header()
	hd.Set(ErrorHeader, code)
	hd.Set("Content-Type", "application/json")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-store")
	body := `{"error":` + strconv.Quote(code)
	if h := hd.Get(HighestHeader); h != "" {
		body += `,"highest":"` + h + `"` // a decimal token: nothing to escape
	}
	w.WriteHeader(status)
	io.WriteString(w, body+"}\n")
}

func (h *handler) debug(r *http.Request, msg string, args ...any) {
	if h.c.log != nil {
		h.c.log.DebugContext(r.Context(), "fencehttp: "+msg, append(args, "method", r.Method)...)
	}
}

func (h *handler) error(r *http.Request, msg string, tok fence.Token, err error) {
	if h.c.log != nil {
		h.c.log.ErrorContext(r.Context(), "fencehttp: "+msg, "token", tok, "method", r.Method, "err", err)
	}
}
