// Package userinfo hides the password of a URL's user information, for the
// error messages and logs of every backend's Connect and of the zkrecipes
// command: a --servers URL may carry one, and no secret goes into any output.
package userinfo

import (
	"net/url"
	"strings"
)

// Redact returns raw with the password of its user information replaced by
// "xxxxx" ("redis://:xxxxx@host:6379"). A URL that parses is redacted as
// url.URL.Redacted does. For one that does not, or where an '@' lies outside
// what net/url took for the user information ("redis:/:pw@host"), everything
// between the scheme and the last '@' counts as user information and only
// its user name (the text before its first ':') is kept: over-redacting is
// harmless, printing a password is not. A string without '@' is returned as
// it is: it holds no user information.
func Redact(raw string) string {
	if !strings.Contains(raw, "@") {
		return raw
	}
	if u, err := url.Parse(raw); err == nil && u.User != nil && !strings.Contains(u.Host+u.Path+u.RawQuery+u.Fragment, "@") {
		return u.Redacted()
	}
	at := strings.LastIndexByte(raw, '@')
	start := schemeEnd(raw[:at])
	for start < at && raw[start] == '/' {
		start++
	}
	user := raw[start:at]
	if c := strings.IndexByte(user, ':'); c >= 0 {
		user = user[:c] + ":xxxxx"
	}
	return raw[:start] + user + raw[at:]
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
