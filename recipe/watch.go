package recipe

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"
)

// nodeWatch is the one data watch a Session keeps on a znode path, shared by
// every waiter of the Session that waits on that path. go-zookeeper cannot
// remove a watch: without sharing, each waiter that gives up (ctx ended)
// would leave one more registration behind until the node changes. With it,
// a path costs one server watch and one client registration however many
// waiters come and go.
type nodeWatch struct {
	armed   bool // a getData watch is set at the server
	waiters map[chan struct{}]struct{}
}

// watchNode returns a channel that is closed when the znode at path (an
// absolute path) is deleted or changed, when its watch is dropped (session
// expiry), or at once if it does not exist. stop deregisters the caller and
// must be called when it stops waiting. The watch is a data watch (getData),
// which leaves nothing behind on a missing node, and is certain to fire for
// the ephemeral nodes the recipes watch.
func (s *Session) watchNode(ctx context.Context, path string) (<-chan struct{}, func(), error) {
	ch := make(chan struct{})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, ErrSessionClosed
	}
	w := s.watches[path]
	if w == nil {
		w = &nodeWatch{waiters: make(map[chan struct{}]struct{})}
		s.watches[path] = w
	}
	w.waiters[ch] = struct{}{}
	armed := w.armed
	s.mu.Unlock()

	stop := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.watches[path] == w {
			delete(w.waiters, ch)
			if !w.armed && len(w.waiters) == 0 {
				delete(s.watches, path)
			}
		}
	}
	if armed {
		return ch, stop, nil
	}
	err := s.retry(ctx, func() (err error) {
		_, _, _, err = s.conn.GetW(path)
		return err
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		if s.watches[path] == w { // not fired meanwhile
			w.armed = true
		}
	case errors.Is(err, zk.ErrNoNode):
		if s.watches[path] == w {
			s.fireLocked(path, w) // gone already: everybody re-evaluates
		}
	default:
		if s.watches[path] == w {
			delete(w.waiters, ch)
			if !w.armed && len(w.waiters) == 0 {
				delete(s.watches, path)
			}
		}
		return nil, nil, err
	}
	return ch, stop, nil
}

// fireLocked wakes every waiter of w and forgets the watch.
func (s *Session) fireLocked(path string, w *nodeWatch) {
	delete(s.watches, path)
	for ch := range w.waiters {
		close(ch)
	}
	w.waiters = nil
}
