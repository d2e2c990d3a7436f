// Package userinfo hides the passwords a connection string carries, for the
// error messages and logs of every backend's Connect and of the zkrecipes
// command: no secret goes into any output. It is the one place that knows
// where a password can sit:
//
//   - a URL's user information ("redis://:pw@host", "postgres://u:pw@host");
//   - a URL query parameter whose name says it is one ("?password=",
//     "?sslpassword=", any name holding "pass", "pwd", "secret" or "token");
//   - a keyword/value string's value of such a keyword, as libpq and pgx
//     read it ("password=pw", "password = 'p w\' x'").
//
// Redact rewrites such a string for display; Secrets lists what Redact
// hides, so that Scrub and Hide can take the same values out of a driver's
// error text, which may quote a part of the string.
package userinfo

import (
	"net/url"
	"strings"
)

// Mask is what every hidden password is replaced with.
const Mask = "xxxxx"

// Redact returns raw with every password in it replaced by Mask
// ("redis://:xxxxx@host:6379", "host=db password=xxxxx"). For a URL that
// does not parse, or where an '@' lies outside what net/url took for the
// user information ("redis:/:pw@host"), everything between the scheme and
// the last '@' counts as user information and only its user name (the text
// before its first ':') is kept; "user:pw@host", which net/url reads as
// the scheme "user", keeps "user:". An unterminated quoted value is hidden to
// the end of the string. A password of 4 bytes or more is hidden wherever
// else it appears in raw too ("?application_name=" + the password): a
// shorter one only where it stands (see Scrub). Over-redacting is
// harmless, printing a password is not. A string that holds none is
// returned as it is.
func Redact(raw string) string {
	spans := find(raw)
	if len(spans) == 0 {
		return raw
	}
	var b strings.Builder
	last := 0
	for _, s := range spans {
		b.WriteString(raw[last:s.start])
		b.WriteString(Mask)
		last = s.end
	}
	b.WriteString(raw[last:])
	out := b.String()
	return Scrub(out, secrets(raw, spans)...) // a password repeated elsewhere (a misplaced value)
}

// span is one hidden part of a string: raw[start:end], whose meaning (the
// value a driver would use: unescaped, percent-decoded) is value.
type span struct {
	start, end int
	value      string
}

// find returns the spans of raw's passwords, in order and not overlapping.
func find(raw string) []span {
	if IsKeywordValue(raw) {
		return keywordSpans(raw)
	}
	var spans []span
	from := 0
	if s, ok := userSpan(raw); ok {
		spans = append(spans, s)
		from = s.end
	}
	return append(spans, querySpans(raw, from)...)
}

// userSpan returns the span of the password in raw's user information.
func userSpan(raw string) (span, bool) {
	if !strings.Contains(raw, "@") {
		return span{}, false
	}
	if u, err := url.Parse(raw); err == nil && u.User != nil && !strings.Contains(u.Host+u.Path+u.RawQuery+u.Fragment, "@") {
		pw, ok := u.User.Password()
		if !ok {
			return span{}, false
		}
		// The authority runs from "//" to the first '/', '?' or '#'; net/url
		// ends its user information at the authority's last '@'.
		start := strings.Index(raw, "//") + 2
		auth := raw[start:]
		if i := strings.IndexAny(auth, "/?#"); i >= 0 {
			auth = auth[:i]
		}
		at := strings.LastIndexByte(auth, '@')
		c := strings.IndexByte(auth[:at], ':')
		return span{start + c + 1, start + at, pw}, true
	}
	at := strings.LastIndexByte(raw, '@')
	start := schemeEnd(raw[:at])
	opaque := start > 0 && start < at && raw[start] != '/' // "user:pw@host" read as scheme "user"
	for start < at && raw[start] == '/' {
		start++
	}
	c := strings.IndexByte(raw[start:at], ':')
	switch {
	case c < 0 && opaque:
		c = -1 // what follows the "scheme" is the password
	case c < 0:
		return span{}, false
	}
	s := span{start: start + c + 1, end: at}
	s.value = raw[s.start:s.end]
	if v, err := url.PathUnescape(s.value); err == nil {
		s.value = v
	}
	return s, true
}

// querySpans returns the spans of the secret parameters of the query that
// follows the first '?' at or after from. When there is one, a fragment
// ('#' and after) is hidden too: it can be the rest of a value that held an
// unescaped '#'.
func querySpans(raw string, from int) []span {
	q := strings.IndexByte(raw[from:], '?')
	if q < 0 {
		return nil
	}
	q += from + 1
	end := len(raw)
	if h := strings.IndexByte(raw[q:], '#'); h >= 0 {
		end = q + h
	}
	var spans []span
	for i := q; i < end; {
		j := strings.IndexAny(raw[i:end], "&;")
		if j < 0 {
			j = end - i
		}
		pair := raw[i : i+j]
		if k, v, ok := strings.Cut(pair, "="); ok && v != "" && secretKey(unescape(k)) {
			start := i + len(k) + 1
			spans = append(spans, span{start, i + j, unescape(v)})
		}
		i += j + 1
	}
	if len(spans) > 0 && end < len(raw)-1 {
		spans = append(spans, span{end + 1, len(raw), raw[end+1:]})
	}
	return spans
}

func unescape(s string) string {
	if v, err := url.QueryUnescape(s); err == nil {
		return v
	}
	return s
}

// secretKey reports whether a parameter or keyword named k holds a secret.
func secretKey(k string) bool {
	k = strings.ToLower(k)
	for _, w := range []string{"pass", "pwd", "secret", "token"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// schemeEnd returns the index just after the "scheme:" that starts s, or 0
// if s does not start with a scheme (RFC 3986: a letter, then letters,
// digits, '+', '-' or '.').
func schemeEnd(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return i + 1
		default:
			return 0
		}
	}
	return 0
}
