package zookeeper

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// withDefaultPort returns host:port for a server entry, adding the
// default port (2181, zkside.DefaultPort)
// when the entry has none ("zk1", "127.0.0.1", "[::1]", "::1"). It returns
// an error matching recipe.ErrBadOption for a port that is not a number in
// 1..65535.
func withDefaultPort(h string) (string, error) {
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		host = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		if strings.Contains(host, ":") && net.ParseIP(host) == nil {
			return "", fmt.Errorf("%w: server entry %q is not host:port", recipe.ErrBadOption, h)
		}
		return net.JoinHostPort(host, strconv.Itoa(zkside.DefaultPort)), nil
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return "", fmt.Errorf("%w: server entry %q is not host:port with a port in 1..65535", recipe.ErrBadOption, h)
	}
	return h, nil
}

// dialWatch follows Connect's attempts, so that Connect can say why no
// session came (the last failure, which go-zookeeper only logs) and give up
// when nothing listens: when every address refused twice in a row (a
// starting server binds its port within moments; go-zookeeper waits a
// second per round, so about a second after the first refusal). Any other
// outcome (a dial timeout, a connection accepted) starts the count again.
// With TLS, a handshake rejected (tlsRejected) counts as a refusal, and
// an established TLS connection does not start the count again: a TLS 1.3
// server refuses the client's certificate only on the first read.
type dialWatch struct {
	addrs func() int  // how many addresses the servers resolved to
	tls   *tls.Config // WithTLS's; nil without TLS

	mu      sync.Mutex
	last    error                   // the last failure
	open    string                  // an address whose connection is up but has sent no handshake reply yet
	refused int                     // consecutive refused dials
	giveUp  context.CancelCauseFunc // while Connect waits; nil after
	gone    bool                    // Connect gave up: no more connections (abandon)
	wrong   wrongServers            // addresses of other servers, while Connect waits (wrong.go)
}

// errAbandoned is the dial error after Connect gave up.
var errAbandoned = errors.New("recipe: Connect gave up: no more connections")

// admit returns track() for a dialled connection c, or closes c and fails
// when Connect has given up meanwhile: under the same lock as abandon, so
// that a connection is either refused here or visible to abandon's caller
// (track stores it as the Session's current connection).
func (w *dialWatch) admit(c net.Conn, track func() net.Conn) (net.Conn, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gone {
		c.Close()
		return nil, errAbandoned
	}
	return track(), nil
}

// abandon makes every later dial fail at once, and admit refuse a dial
// in flight.
func (w *dialWatch) abandon() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gone = true
}

// isAbandoned reports whether abandon was called.
func (w *dialWatch) isAbandoned() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gone
}

// dialed records the outcome of a dial of addr.
func (w *dialWatch) dialed(addr string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.open = addr
		if w.tls == nil {
			w.refused = 0
		}
		return
	}
	w.last, w.open = err, ""
	w.countLocked(err)
}

// countLocked counts a failed attempt: a refusal towards giving up, any
// other failure starts the count again. w.mu must be held.
func (w *dialWatch) countLocked(err error) {
	refused := errors.Is(err, syscall.ECONNREFUSED)
	wrong := errors.Is(err, recipe.ErrWrongServer)
	if !refused && !wrong && !rejected(err) {
		w.refused = 0
		return
	}
	w.refused++
	if n := w.addrs(); n > 0 && w.refused >= 2*n && w.giveUp != nil {
		switch {
		case refused && len(w.wrong.found) > 0, wrong:
			w.giveUp(fmt.Errorf("every server refused the connection or is not a ZooKeeper server: %w", err))
		case refused:
			w.giveUp(fmt.Errorf("every server refused the connection (nothing listens at %s): %w", itsAddresses(n), err))
		default:
			w.giveUp(fmt.Errorf("the TLS handshake failed, twice at every address: %w", err))
		}
	}
}

// itsAddresses names n addresses of the servers in a message.
func itsAddresses(n int) string {
	switch n {
	case 1:
		return "its address"
	case 2:
		return "either of its 2 addresses"
	}
	return fmt.Sprintf("any of its %d addresses", n)
}

// failedBeforeHandshake records a connection to addr that failed before the
// server's handshake reply was read.
func (w *dialWatch) failedBeforeHandshake(addr string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open = ""
	if w.tls != nil {
		if terr := tlsFailure(addr, w.tls, err); rejected(terr) {
			w.last = terr
			w.countLocked(terr)
			return
		}
		w.refused = 0
	}
	w.last = fmt.Errorf("%s accepted the connection but closed it before the handshake: %w", addr, err)
}

// lastError describes the last failure (nil if there was none).
func (w *dialWatch) lastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open != "" {
		return fmt.Errorf("%s accepted the connection but sent no handshake reply", w.open)
	}
	return w.last
}

// waiting sets (or, with nil, clears) what gives Connect's wait up.
func (w *dialWatch) waiting(giveUp context.CancelCauseFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.giveUp = giveUp
	w.wrong.reset()
}
