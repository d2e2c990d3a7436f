package fencehttp

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// errBufferFull is what the handler's Write returns past the limit.
var errBufferFull = errors.New("fencehttp: response over the buffer's limit (fencehttp.WithMaxResponse)")

// recorder is the ResponseWriter the handler writes to inside the fence:
// its response is kept until the fence has answered.
type recorder struct {
	hd     http.Header
	status int // 0 until WriteHeader or Write
	body   bytes.Buffer
	max    int
	over   bool
}

func newRecorder(max int) *recorder { return &recorder{hd: make(http.Header), max: max} }

// Header implements http.ResponseWriter.
func (r *recorder) Header() http.Header { return r.hd }

// WriteHeader implements http.ResponseWriter: the first final status
// counts; informational ones (1xx) are dropped. A code outside 100..999
// panics, as net/http's does, but inside the fenced write (nothing is
// recorded) rather than when the response is sent.
func (r *recorder) WriteHeader(status int) {
	if status < 100 || status > 999 {
		panic(fmt.Sprintf("fencehttp: invalid WriteHeader code %d", status))
	}
	if r.status != 0 || status < 200 {
		return
	}
	r.status = status
}

// Write implements http.ResponseWriter; past the limit it fails and
// marks the response as over.
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.over || r.body.Len()+len(p) > r.max {
		r.over = true
		return 0, errBufferFull
	}
	return r.body.Write(p)
}

// code is the status the handler answered (200 if it wrote nothing).
func (r *recorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// send writes the recorded response to w, without the protocol's headers.
func (r *recorder) send(w http.ResponseWriter) {
	hd := w.Header()
	for k, v := range r.hd {
		if !protocolHeader(k) {
			hd[k] = v
		}
	}
	w.WriteHeader(r.code())
	w.Write(r.body.Bytes())
}

// protocolHeader reports whether the key k of a handler's header map is
// one of the wrapper's own headers (ErrorHeader, HighestHeader) in any
// spelling a client reads as it: a handler can set a map key directly
// (w.Header()["fencing-error"]), which net/http sends as it is and the
// client canonicalises, and a trailer (http.TrailerPrefix) too.
func protocolHeader(k string) bool {
	k = strings.TrimPrefix(k, http.TrailerPrefix)
	return strings.EqualFold(k, ErrorHeader) || strings.EqualFold(k, HighestHeader)
}
