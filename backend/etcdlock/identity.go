package etcdlock

import (
	"fmt"
	"os"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// checkIdentity returns why id is no identity ("" if it is one): 1 to
// MaxIdentityLen bytes of printable UTF-8.
func checkIdentity(id string) string {
	switch {
	case id == "":
		return "empty"
	case len(id) > MaxIdentityLen:
		return fmt.Sprintf("%d bytes, longer than MaxIdentityLen (%d)", len(id), MaxIdentityLen)
	case !utf8.ValidString(id):
		return "not valid UTF-8"
	}
	for _, r := range id {
		if !unicode.IsPrint(r) {
			return fmt.Sprintf("unprintable character %U", r)
		}
	}
	return ""
}

// checkStoredIdentity is checkIdentity for a key's value read back, which
// another client may have written: empty is accepted (the keys of
// versions before WithIdentity), and the reason never quotes the value.
func checkStoredIdentity(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	if len(v) > MaxIdentityLen {
		return fmt.Sprintf("a value of %d bytes, longer than MaxIdentityLen (%d)", len(v), MaxIdentityLen)
	}
	if why := checkIdentity(string(v)); why != "" {
		return "a value " + why
	}
	return ""
}

// defaultIdentity is a Session's identity without WithIdentity:
// "<hostname>:<pid>" ("unknown" for a host name that is no identity).
func defaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || checkIdentity(host) != "" || len(host) > MaxIdentityLen-12 {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}
