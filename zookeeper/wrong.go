package zookeeper

import (
	"context"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/connerr"
)

// A server that speaks another protocol (an HTTP server, another lock
// service, an SSH server) makes go-zookeeper wait for a handshake reply
// that never comes, or retry on garbage, until the connect timeout. So,
// while Connect waits, each address whose first plaintext connection has
// no session after connerr.SlowAfter is identified once (connerr.Identify);
// an address found to be another server is not dialled again by this
// Connect (its dial fails at once, counted as a refusal) and its open
// connection is closed, so that go-zookeeper moves on to the next address;
// when every address is another server, Connect gives up with a
// *connerr.WrongServerError (recipe.ErrWrongServer, recipe.ErrUnreachable)
// naming what answered. A right server that is merely slow answers
// ZooKeeper's own srvr and is left alone; one that says nothing leaves
// Connect to its timeout. After Connect every address is dialled again.

// wrongServers is what dialWatch knows of the addresses Connect found to
// be other servers; its fields are guarded by dialWatch.mu.
type wrongServers struct {
	probed map[string]bool          // addresses identified, or being identified
	found  map[string]connerr.Found // addresses of other servers, and what answered
	errs   map[string]error         // their dial error
}

// watchFirst arranges, for a plaintext connection to addr admitted while
// Connect waits, to identify addr after connerr.SlowAfter if Connect
// still waits then (once per address per Connect).
func (s *Session) watchFirst(addr string) {
	dw := s.dials
	if s.cfg.tls != nil || !dw.startProbe(addr) {
		return
	}
	time.AfterFunc(connerr.SlowAfter, func() {
		if !dw.connecting() {
			return
		}
		s.life.Go(func() {
			f := connerr.Identify(s.life.Context(), s.probeDial(addr), connerr.ZooKeeper)
			if connerr.Wrong(f, connerr.ZooKeeper) && dw.wrongServer(addr, f) {
				s.wire.dropConn() // the connection to addr, still waiting for a reply
			}
		})
	})
}

// probeDial dials addr for Identify with the Session's dialer.
func (s *Session) probeDial(addr string) func(context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		timeout := time.Second
		if dl, ok := ctx.Deadline(); ok {
			timeout = time.Until(dl)
		}
		if s.cfg.dialer != nil {
			return s.cfg.dialer("tcp", addr, timeout)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// startProbe reports whether addr is to be identified: Connect waits, and
// it was not yet.
func (w *dialWatch) startProbe(addr string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.giveUp == nil || w.wrong.probed[addr] {
		return false
	}
	w.wrong.probed[addr] = true
	return true
}

// connecting reports whether Connect still waits.
func (w *dialWatch) connecting() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.giveUp != nil
}

// knownWrong returns the dial error of addr when Connect found it to be
// another server, nil otherwise.
func (w *dialWatch) knownWrong(addr string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wrong.errs[addr]
}

// wrongServer records that addr is another server (f answered), gives
// Connect up when every address is, and reports whether addr's connection
// is the one open and waiting for a handshake reply.
func (w *dialWatch) wrongServer(addr string, f connerr.Found) (open bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.giveUp == nil {
		return false
	}
	w.wrong.found[addr] = f
	w.wrong.errs[addr] = &connerr.WrongServerError{Want: connerr.ZooKeeper, Addrs: []string{addr}, Found: []connerr.Found{f}}
	w.last = w.wrong.errs[addr]
	if n := w.addrs(); n > 0 && len(w.wrong.found) >= n {
		e := &connerr.WrongServerError{Want: connerr.ZooKeeper}
		for _, a := range slices.Sorted(maps.Keys(w.wrong.found)) {
			e.Addrs, e.Found = append(e.Addrs, a), append(e.Found, w.wrong.found[a])
		}
		w.giveUp(e)
	}
	return w.open == addr
}

// reset forgets what the last Connect found (with it, every address is
// dialled again).
func (ws *wrongServers) reset() {
	ws.probed, ws.found, ws.errs = map[string]bool{}, map[string]connerr.Found{}, map[string]error{}
}
