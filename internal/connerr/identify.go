package connerr

import (
	"bytes"
	"context"
	"net"
	"strings"
	"time"
)

// Protocol is what a server speaks, as Identify tells it from its answers.
type Protocol string

// The protocols Identify tells apart. The four lock services are the
// backends' own; the rest are what is often found on a wrong port.
const (
	Unknown    Protocol = ""           // no answer Identify could name
	ZooKeeper  Protocol = "ZooKeeper"  // answers the four-letter word srvr
	Etcd       Protocol = "etcd"       // answers GET /version with "etcdserver"
	PostgreSQL Protocol = "PostgreSQL" // answers an SSLRequest with the one byte S or N
	Redis      Protocol = "Redis"      // answers PING with a RESP line (+PONG, -NOAUTH...)
	HTTP       Protocol = "HTTP"       // answers with an HTTP/1 status line, or an HTML page (HTTP/0.9 style)
	SSH        Protocol = "SSH"        // greets with SSH-
	TLS        Protocol = "TLS"        // answers plaintext with a TLS alert or record
	Greeting   Protocol = "greeting"   // greets with something else, unasked
)

// Found is what answered at an address: its protocol and, for the
// message, the first line it sent (printable ASCII only, shortened).
type Found struct {
	Protocol Protocol
	Line     string
}

// String says what was found, for an error message: "an HTTP server
// answered (HTTP/1.1 404 Not Found)", "a PostgreSQL server".
func (f Found) String() string {
	switch f.Protocol {
	case Unknown:
		return "no server Identify could name"
	case HTTP:
		return "an HTTP server answered (" + f.Line + ")"
	case SSH:
		return "an SSH server answered (" + f.Line + ")"
	case Greeting:
		return "a server greeted with " + quote(f.Line)
	case Etcd:
		return "an etcd server answered"
	}
	return article(f.Protocol) + " " + string(f.Protocol) + " server answered"
}

// article is "a" or "an" for p.
func article(p Protocol) string {
	if strings.ContainsRune("AEIOU", rune(p[0])) || p == Etcd {
		return "an"
	}
	return "a"
}

// hellos are what Identify sends, one per connection: each of the four
// lock services answers its own at once and in a way no other of them
// does, and none carries anything of the caller's (no name, no password).
var hellos = map[Protocol][]byte{
	ZooKeeper:  []byte("srvr"),
	Etcd:       []byte("GET /version HTTP/1.1\r\nHost: zkrecipes\r\nConnection: close\r\n\r\n"),
	PostgreSQL: {0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}, // SSLRequest
	Redis:      []byte("PING\r\n"),
}

// Timings of Identify: how long a server may take to greet unasked, to
// answer want's hello before the others are sent too, and to answer a
// hello at all. A server that says nothing within them is Unknown.
const (
	greetWait  = 100 * time.Millisecond
	soloWait   = 100 * time.Millisecond
	answerWait = 400 * time.Millisecond
)

// Identify tells what speaks at the address dial connects to, within about
// half a second: a greeting sent unasked (SSH), else the answer to want's
// own hello on the same connection, else (soloWait later, or at once if
// that connection closed) the answers to the other hellos too, each on a
// connection of its own, so that a right server sees its own protocol's
// request alone unless it is slow. Unknown when nothing answered that it
// can name (a server that says nothing, one that closes the connection).
// It closes every connection it opens and returns when ctx ends.
func Identify(ctx context.Context, dial func(context.Context) (net.Conn, error), want Protocol) Found {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make(chan Found, len(hellos))
	go func() { found <- ask(ctx, dial, greetWait, hellos[want]) }()
	solo := time.NewTimer(greetWait + soloWait)
	defer solo.Stop()
	pending := 1
	select {
	case f := <-found:
		if f.Protocol != Unknown {
			return f
		}
		pending--
	case <-solo.C:
	}
	for p, hello := range hellos {
		if p != want {
			pending++
			go func() { found <- ask(ctx, dial, 0, hello) }()
		}
	}
	var best Found
	for ; pending > 0; pending-- {
		f := <-found
		if rank(f.Protocol) > rank(best.Protocol) {
			best = f
		}
		if rank(best.Protocol) >= rank(HTTP) {
			cancel() // named by a first line or better: the rest end at once
		}
	}
	return best
}

// rank orders what answers say: a lock service names the server best,
// then what is named by its first line, then anything else.
func rank(p Protocol) int {
	switch p {
	case ZooKeeper, Etcd, PostgreSQL, Redis:
		return 3
	case HTTP, SSH:
		return 2
	case TLS, Greeting:
		return 1
	}
	return 0
}

// ask opens a connection, waits greet for a greeting, then (if there was
// none) sends hello and classifies the answer.
func ask(ctx context.Context, dial func(context.Context) (net.Conn, error), greet time.Duration, hello []byte) Found {
	ctx, cancel := context.WithTimeout(ctx, greet+answerWait)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		return Found{}
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 512)
	if greet > 0 {
		_ = c.SetReadDeadline(time.Now().Add(greet))
		if n, _ := c.Read(buf); n > 0 {
			return classify(buf[:n], true)
		}
		if ctx.Err() != nil {
			return Found{}
		}
		_ = c.SetReadDeadline(time.Time{})
	}
	if _, err := c.Write(hello); err != nil {
		return Found{}
	}
	n := 0
	for n < len(buf) { // until the first line is complete, or the server stops
		m, err := c.Read(buf[n:])
		n += m
		if err != nil || bytes.Contains(buf[:n], []byte("\n")) || n == 1 && (buf[0] == 'S' || buf[0] == 'N') {
			break
		}
	}
	return classify(buf[:n], false)
}
