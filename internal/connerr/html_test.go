package connerr

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// pythonPage is what `python3 -m http.server` (Python 3.11) answers to a
// request line it cannot parse, such as Redis's PING: an HTML error page
// with no status line (HTTP/0.9 style), then it closes the connection.
// Recorded from the real server; CI's machine has no python3.
const pythonPage = "<!DOCTYPE HTML>\n<html lang=\"en\">\n    <head>\n        <meta charset=\"utf-8\">\n" +
	"        <title>Error response</title>\n    </head>\n    <body>\n        <h1>Error response</h1>\n" +
	"        <p>Error code: 400</p>\n        <p>Message: Bad request syntax ('PING').</p>\n" +
	"        <p>Error code explanation: 400 - Bad request syntax or unsupported method.</p>\n    </body>\n</html>\n"

// pythonHTTPServer starts a server that answers as python's http.server
// does: it reads a request line, answers one ending in HTTP/1.x with a 404
// status line and any other with pythonPage, and closes; it returns its
// host:port.
func pythonHTTPServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(2 * time.Second))
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil {
					return
				}
				if strings.Contains(line, " HTTP/1.") {
					_, _ = c.Write([]byte("HTTP/1.0 404 File not found\r\nServer: SimpleHTTP/0.6 Python/3.11.7\r\n\r\n"))
					return
				}
				_, _ = c.Write([]byte(pythonPage))
			}()
		}
	}()
	return ln.Addr().String()
}

// TestIdentifyHTMLPage: an HTTP server that answers PING with an HTML page
// and no status line is named an HTTP server, as docs/backends.md promises,
// not "a server greeted with <!DOCTYPE HTML>".
func TestIdentifyHTMLPage(t *testing.T) {
	addr := pythonHTTPServer(t)
	for _, want := range []Protocol{Redis, PostgreSQL, ZooKeeper} {
		f := Identify(context.Background(), TCP(addr, nil).Dial, want)
		if f.Protocol != HTTP || !strings.HasPrefix(f.String(), "an HTTP server answered (") {
			t.Errorf("asking for %s: %+v (%s), want an HTTP server", want, f, f)
		}
	}
	for _, page := range []string{pythonPage, "\r\n<html><body>400</body></html>", "<!doctype html>"} {
		if f := classify([]byte(page), false); f.Protocol != HTTP {
			t.Errorf("classify(%q) = %+v, want HTTP", page, f)
		}
	}
}
