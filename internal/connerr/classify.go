package connerr

import (
	"bytes"
	"strconv"
	"strings"
)

// classify tells the protocol of b, the first bytes a server sent: unasked
// (greeted) or in answer to one of Identify's hellos.
func classify(b []byte, greeted bool) Found {
	line := firstLine(b)
	switch {
	case len(b) == 0:
		return Found{}
	case bytes.HasPrefix(b, []byte("SSH-")):
		return Found{SSH, line}
	case bytes.HasPrefix(b, []byte("HTTP/")):
		if bytes.Contains(b, []byte(`"etcdserver"`)) {
			return Found{Etcd, line}
		}
		return Found{HTTP, line}
	case len(b) >= 2 && (b[0] == 0x15 || b[0] == 0x16) && b[1] == 0x03:
		return Found{TLS, ""}
	case greeted:
		return Found{Greeting, line}
	case htmlPage(b): // an HTTP/0.9-style answer, without a status line: python3 -m http.server's to PING
		return Found{HTTP, firstLine(bytes.TrimLeft(b, " \t\r\n"))}
	case len(b) == 1 && (b[0] == 'S' || b[0] == 'N'):
		return Found{PostgreSQL, ""}
	case bytes.HasPrefix(b, []byte("+PONG")), len(b) > 1 && b[0] == '-' && isRESPError(line[1:]):
		return Found{Redis, line}
	case zooKeeperLine(line):
		return Found{ZooKeeper, line}
	}
	return Found{Greeting, line}
}

// htmlPage reports whether b begins an HTML document, as an HTTP server
// answers a request line it cannot parse (a bare PING) with no status line.
func htmlPage(b []byte) bool {
	b = bytes.ToLower(bytes.TrimLeft(b, " \t\r\n"))
	return bytes.HasPrefix(b, []byte("<!doctype html")) || bytes.HasPrefix(b, []byte("<html"))
}

// isRESPError reports whether s (after a '-') is a RESP error line: an
// upper-case code (ERR, NOAUTH, WRONGPASS, DENIED...), a space, a message.
func isRESPError(s string) bool {
	code, _, ok := strings.Cut(s, " ")
	return ok && code != "" && strings.ToUpper(code) == code && strings.IndexFunc(code, func(r rune) bool { return r < 'A' || r > 'Z' }) < 0
}

// zooKeeperLine reports whether line is ZooKeeper's answer to srvr: its
// version, or the refusal of a four-letter word it does not allow, or
// "not currently serving".
func zooKeeperLine(line string) bool {
	return strings.HasPrefix(line, "Zookeeper version:") || strings.HasPrefix(line, "srvr is not executed") ||
		strings.Contains(line, "ZooKeeper instance is not currently serving")
}

// firstLine is the first line of b, as printable ASCII, at most 60
// characters: what a message can quote of a stranger's bytes.
func firstLine(b []byte) string {
	if i := bytes.IndexAny(b, "\r\n"); i >= 0 {
		b = b[:i]
	}
	var s strings.Builder
	for _, c := range b {
		if s.Len() == 60 {
			s.WriteString("...")
			break
		}
		if c < 0x20 || c > 0x7e {
			c = '?'
		}
		s.WriteByte(c)
	}
	return s.String()
}

// quote quotes a line for a message.
func quote(s string) string { return strconv.Quote(s) }
