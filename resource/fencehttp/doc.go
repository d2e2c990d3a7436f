// Package fencehttp fences the writes an HTTP service makes for its
// clients: a client holding a lock sends its lease's fencing token in the
// Fencing-Token header, and the service runs the request's handler only if
// that token is not lower than the highest it accepted for the resource,
// through any [fence.Fence] (a fence.Guard, fencesql, fencezk, fenceetcd,
// fenceredis). A paused holder whose lease ended and whose successor has
// written gets 409 Conflict with the highest accepted token, and its
// client sees a *fence.StaleError (fence.ErrStale).
//
// Server: [Handler] wraps the handlers that change the resource.
// Client: [Transport] (or [SetToken]) sets the header from a lease, and
// [CheckResponse] turns the wrapper's refusals into errors.
//
// # What is atomic
//
// Handler reads the request body (up to [WithMaxRequest]) before it takes
// the fence, so a slow client does not hold the fence, then calls
// fence.Admit with a write that runs the handler with a recording
// ResponseWriter and the request's context replaced by the write's. So:
//   - With a fence.Guard, the handler runs under the resource's lock: its
//     in-process effects are atomic with the check and the record. Effects
//     elsewhere (a database, a call) are not fenced.
//   - With fencesql, what the handler writes through the transaction
//     (fencesql.TxFrom(r.Context())) commits with the token, or not at
//     all; with fencezk, the operations it adds (fencezk.AddOps) land in
//     one multi with the register's update. Anything else it does is not
//     fenced, and may happen for a request that is then refused (if the
//     fence checks again when it applies) or rolled back.
//   - The handler's response is buffered (up to [WithMaxResponse]) and sent
//     only once Admit has returned: a client never gets a 2xx for a write
//     whose token was not recorded. A status of 400 or above from the
//     handler makes the write fail: the token is not recorded, the fence
//     applies nothing of it (the transaction is rolled back), and the
//     handler's response is sent as it wrote it. A response larger than
//     the limit fails the write too (500).
//   - A panicking handler: the fence records nothing (a transaction is
//     rolled back), nothing is sent, and the panic goes on to net/http.
//   - A response lost on the way back (the connection breaks) leaves the
//     client not knowing whether the write landed, as for any HTTP call:
//     retrying with the same token is accepted if nothing newer landed.
//     An ErrUncertain from the fence is sent as a 500 that [CheckResponse]
//     turns into an error matching fence.ErrUncertain.
//
// The handler gets neither http.Flusher nor http.Hijacker: streaming
// responses and protocol upgrades cannot be fenced this way.
//
// # Refusals
//
// The wrapper's own answers carry the header Fencing-Error with a short
// code, and a small JSON body {"error": "..."}; it never echoes the
// request's token header, its resource name or an error's text (those go
// to the logger):
//
//	400 no-token      no Fencing-Token header, or the zero token
//	400 bad-token     not one decimal token (duplicates, signs, leading
//	                  zeros, spaces, over 2^63-1)
//	400 bad-resource  the resource name fails fence.CheckResource or the fence refuses it
//	400 bad-body      the request body could not be read
//	409 stale         a lower token; Fencing-Highest: the highest accepted
//	413 too-large     a request body over WithMaxRequest
//	500 uncertain     the fence's answer was lost: the write may have landed
//	500 internal      the fence's other errors, a response over WithMaxResponse
//	503 unavailable   the request's context ended before the write
//
// The handler's responses never carry Fencing-Error or Fencing-Highest
// (the wrapper removes them in every spelling: a map key set directly,
// such as w.Header()["fencing-error"], and trailers too), so a 409 of its
// own is not taken for a stale token.
//
// [CheckResponse] turns a refusal into an error:
//   - 409 "stale": a *fence.StaleError (fence.ErrStale) with the highest
//     accepted token, the token of resp.Request's header, and as Resource
//     the request's URL without its query (redacted);
//   - "no-token": fence.ErrNoToken; "bad-token": fence.ErrBadToken;
//     "bad-resource": fence.ErrBadResource; "uncertain": fence.ErrUncertain
//     (the write may have landed), each wrapped;
//   - otherwise an error naming the status and the code, matching
//     ErrRefused.
//
// # Redirects
//
// http.Client calls [Transport]'s RoundTrip for each hop. A hop to the
// same scheme and host (port included) as the first request is sent with
// the token (on a 307 or 308, with the body again: the server asked for
// the write there). A hop to another is not sent: RoundTrip returns an
// error matching ErrCrossHostRedirect, as the write would reach a service
// the caller did not choose, with the token; to follow it, send a new
// request to the response's Location yourself (a Client whose
// CheckRedirect returns http.ErrUseLastResponse gives you that response).
// The first hop's write may have landed before its redirect: an unknown
// outcome.
//
// # Trust
//
// A token is not a credential. Any client that can reach the handler can
// send the largest token (2^63-1) and so refuse every later holder of the
// lock, for ever unless an operator resets the mark: put the wrapper behind
// authentication, for the lock's holders only. The resource name is read
// from the request by the caller's function; a fence.Guard keeps every name
// it has seen, so map requests to a bounded set of names.
package fencehttp
