package fencehttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/zkrecipes/zkrecipes/fence"
)

// Lease is what the client side needs of a lock's grant; every
// recipe.Lease is one.
type Lease interface {
	// Token is the grant's fencing token.
	Token() fence.Token
	// Context is done once ownership is released or in doubt.
	Context() context.Context
}

// SetToken sets req's Fencing-Token header to t, replacing any earlier
// value. It does not check t: the server refuses the zero token.
func SetToken(req *http.Request, t fence.Token) { req.Header.Set(Header, t.String()) }

// Transport is an http.RoundTripper that sends every request with the
// Fencing-Token header of Lease's token. A request is not sent once
// Lease's context is done: RoundTrip then returns an error matching
// ErrLeaseEnded and the context's cause (recipe.ErrSessionLost, say).
// That check is only the early exit: a holder paused between it and the
// send is refused by the server (409), which [CheckResponse] reports. A
// redirect is followed with the token to the first request's scheme and
// host only (see Redirects in the package documentation).
type Transport struct {
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Lease gives the token; it must not be nil.
	Lease Lease
}

// ErrLeaseEnded is matched by Transport's error for a request not sent
// because its lease had ended.
var ErrLeaseEnded = errors.New("fencehttp: lease ended, request not sent")

// ErrCrossHostRedirect is matched by Transport's error for a redirect to
// another scheme or host than the first request's, not sent.
var ErrCrossHostRedirect = errors.New("fencehttp: redirect to another host not followed with the fencing token")

// RoundTrip implements http.RoundTripper: it sends a copy of req with the
// token header (req itself is not changed).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := t.Lease.Context()
	if ctx.Err() != nil {
		closeBody(req) // RoundTrip must close it, even on errors
		return nil, fmt.Errorf("%w: %w", ErrLeaseEnded, context.Cause(ctx))
	}
	if first := firstRequest(req); first != req && !sameOrigin(first.URL, req.URL) {
		closeBody(req)
		return nil, fmt.Errorf("%w: from %s to %s", ErrCrossHostRedirect, describe(first), describe(req))
	}
	r := req.Clone(req.Context())
	SetToken(r, t.Lease.Token())
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// closeBody closes req's body, if any.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// firstRequest returns the request whose redirects led to req (http.Client
// sets Response, the redirect that made a hop), or req itself.
func firstRequest(req *http.Request) *http.Request {
	for req.Response != nil && req.Response.Request != nil {
		req = req.Response.Request
	}
	return req
}

// sameOrigin reports whether a and b have the same scheme and host (with
// its port, the default one made explicit).
func sameOrigin(a, b *url.URL) bool {
	return a != nil && b != nil && strings.EqualFold(a.Scheme, b.Scheme) &&
		strings.EqualFold(hostPort(a), hostPort(b))
}

// hostPort is u's host:port, with the scheme's default port if none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// CheckResponse returns nil for a response the fenced handler wrote
// (whatever its status: that is the caller's to judge), and an error for
// a refusal of the wrapper (one with a Fencing-Error header): a 409
// "stale" is a *fence.StaleError (fence.ErrStale) with the highest
// accepted token; the other codes match their fence error, or ErrRefused
// (see Refusals in the package documentation). It reads no body.
func CheckResponse(resp *http.Response) error {
	code := resp.Header.Get(ErrorHeader)
	if code == "" {
		return nil
	}
	where := describe(resp.Request)
	var sentinel error
	switch code {
	case "stale":
		high, err := fence.ParseToken(resp.Header.Get(HighestHeader))
		if err == nil {
			return &fence.StaleError{Resource: where, Token: sentToken(resp.Request), Highest: high}
		}
		sentinel = fence.ErrStale
	case "no-token":
		sentinel = fence.ErrNoToken
	case "bad-token":
		sentinel = fence.ErrBadToken
	case "bad-resource":
		sentinel = fence.ErrBadResource
	case "uncertain":
		sentinel = fence.ErrUncertain
	default:
		sentinel = ErrRefused
	}
	if len(code) > 32 {
		code = code[:32] // a hostile server's header is not printed whole
	}
	return fmt.Errorf("fencehttp: %s: %d (%q): %w", where, resp.StatusCode, code, sentinel)
}

// ErrRefused is matched by CheckResponse's error for a refusal of the
// fenced handler other than those with a fence sentinel (too-large,
// internal, unavailable, bad-body, or a code this version does not know).
var ErrRefused = errors.New("fencehttp: refused by the fenced handler")

// sentToken is the token req carried, zero if none or unreadable.
func sentToken(req *http.Request) fence.Token {
	if req == nil {
		return 0
	}
	t, _ := fence.ParseToken(req.Header.Get(Header))
	return t
}

// describe names req's target without user information, query or
// fragment, which may hold secrets.
func describe(req *http.Request) string {
	if req == nil || req.URL == nil {
		return "(unknown request)"
	}
	u := *req.URL
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return req.Method + " " + u.String()
}
