package connerr

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// WrongServerError is Connect's error when every address answered in
// another protocol than the backend's. It matches recipe.ErrWrongServer
// and recipe.ErrUnreachable. Its text names the addresses and what each
// answered; it holds nothing the caller sent (Identify sends no
// credentials).
type WrongServerError struct {
	Want  Protocol
	Addrs []string // the addresses, as the backend names them
	Found []Found  // what answered at each
}

// Error names each address and what answered there ("127.0.0.1:2379 is
// not an etcd server: an HTTP server answered (HTTP/1.1 400 Bad Request)").
func (e *WrongServerError) Error() string {
	var b strings.Builder
	for i, a := range e.Addrs {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s is not %s %s server: %s", a, article(e.Want), e.Want, e.Found[i])
	}
	return b.String()
}

// Is matches recipe.ErrWrongServer and recipe.ErrUnreachable.
func (e *WrongServerError) Is(target error) bool {
	return target == recipe.ErrWrongServer || target == recipe.ErrUnreachable
}

// Wrong reports whether f is the answer of a server that is not one of
// want's: a protocol Identify named, other than want. TLS is not wrong: a
// TLS port of the right server answers a plaintext hello that way, and the
// backends say so themselves (connerr.SpeaksTLS); Unknown is not either.
func Wrong(f Found, want Protocol) bool {
	return f.Protocol != Unknown && f.Protocol != TLS && f.Protocol != want
}

// Target is one address a backend connects to, and how to dial it.
type Target struct {
	Addr string
	Dial func(context.Context) (net.Conn, error)
}

// SlowAfter is how long a first connection may go without success before
// Guard identifies its servers: long for a server on the same network to
// answer a handshake, short enough that a wrong one fails within about a
// second (Identify takes at most about half a second more).
const SlowAfter = 300 * time.Millisecond

// Guard runs connect, a backend's first connection to targets, and fails
// fast when it talks to the wrong server: if connect has not returned after
// SlowAfter, or has failed, each target is identified (Identify); when
// every target is a server of another protocol (Wrong), connect's context
// is cancelled and Guard returns a *WrongServerError once connect has
// returned (unless connect succeeded meanwhile: then nil). Otherwise it
// returns connect's own result, waiting for it as long as it takes (a
// server that says nothing keeps the backend's own connect timeout).
func Guard(ctx context.Context, want Protocol, targets []Target, connect func(context.Context) error) error {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	go func() { done <- connect(cctx) }()
	slow := time.NewTimer(SlowAfter)
	defer slow.Stop()
	var err error
	select {
	case err = <-done:
		if err == nil || ctx.Err() != nil {
			return err
		}
	case <-slow.C:
	}
	ictx, stop := context.WithCancel(ctx)
	defer stop()
	verdict := make(chan error, 1)
	go func() { verdict <- identifyAll(ictx, want, targets) }()
	if err != nil { // connect failed: what answered decides
		if werr := <-verdict; werr != nil {
			return werr
		}
		return err
	}
	select {
	case err = <-done: // connect ended first: its result stands
		stop()
		<-verdict
		return err
	case werr := <-verdict:
		if werr == nil {
			return <-done
		}
		cancel(werr)
		if err := <-done; err == nil {
			return nil
		}
		return werr
	}
}

// identifyAll identifies every target at once and returns a
// *WrongServerError if each is Wrong, nil otherwise.
func identifyAll(ctx context.Context, want Protocol, targets []Target) error {
	found := make([]Found, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { found[i] = Identify(ctx, t.Dial, want) })
	}
	wg.Wait()
	e := &WrongServerError{Want: want, Found: found}
	for i, t := range targets {
		if !Wrong(found[i], want) {
			return nil
		}
		e.Addrs = append(e.Addrs, t.Addr)
	}
	if len(targets) == 0 {
		return nil
	}
	return e
}

// TCP returns a Target dialling addr over TCP with dial, or with a
// net.Dialer when dial is nil.
func TCP(addr string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) Target {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return Target{Addr: addr, Dial: func(ctx context.Context) (net.Conn, error) { return dial(ctx, "tcp", addr) }}
}
