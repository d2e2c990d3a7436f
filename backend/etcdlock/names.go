package etcdlock

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/zkrecipes/zkrecipes/internal/lockname"
	"github.com/zkrecipes/zkrecipes/internal/userinfo"
)

// marker starts the last element of every contender key: the keys of the
// lock named N are <prefix>/N/_lock_<32 hex digits>, and because no element
// of a lock name may start with marker, the range <prefix>/N/_lock_ holds
// the keys of lock N and of no other lock (not those of "N/sub", nor of an
// ancestor of N).
const marker = "_lock_"

// memberMarker starts the last element of every member key of a Group: the
// members of the group named N are <prefix>/N/_member_<id>, and because no
// element of a lock or group name may start with memberMarker (nor with
// marker), the range <prefix>/N/_member_ holds the members of group N and
// no other group's, nor any lock's keys; and no member key is in a lock's
// range (its last element starts with memberMarker, not marker).
const memberMarker = "_member_"

// nameRules are the shared lock-name rules (internal/lockname) with this
// package's MaxNameLen and its one restriction of its own, markerElement.
// Group names follow the same rules.
var nameRules = lockname.Rules{Backend: "etcdlock", MaxLen: MaxNameLen, Extra: markerElement, Err: ErrInvalidName}

// markerElement returns why name is refused by the rule of this package's
// own ("" if it is not): no element of it (its parts between "/") may start
// with marker or memberMarker. That alone keeps every lock's and group's
// key range apart from every other lock's and group's (see lockDir and
// groupDir). Empty elements ("a//b", "a/", "/") and control characters do
// no harm to the key layout and are accepted.
func markerElement(name string) string {
	for _, e := range strings.Split(name, "/") {
		for _, m := range []string{marker, memberMarker} {
			if strings.HasPrefix(e, m) {
				return fmt.Sprintf("element %s starts with %q, which this package reserves for its keys", lockname.Quote(e), m)
			}
		}
	}
	return ""
}

// checkPrefix returns why p is not a key prefix ("" if it is one).
func checkPrefix(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return `does not start with "/"`
	case strings.HasSuffix(p, "/"):
		return `ends with "/"`
	case len(p) > MaxPrefixLen:
		return fmt.Sprintf("%d bytes, longer than MaxPrefixLen (%d)", len(p), MaxPrefixLen)
	}
	return checkText(p)
}

// checkText refuses what would make keys unreadable or ambiguous.
func checkText(s string) string {
	if !utf8.ValidString(s) {
		return "not valid UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Sprintf("control character %U", r)
		}
	}
	return ""
}

// lockDir is the range prefix of the keys of lock name under prefix. A
// leading "/" of name is dropped ("/a" and "a" are one lock), nothing else:
// "a/" and "//a" are locks of their own.
func lockDir(prefix, name string) string {
	return prefix + "/" + strings.TrimPrefix(name, "/") + "/" + marker
}

// groupDir is the range prefix of the member keys of the group name under
// prefix (a leading "/" of name dropped, as for locks); a member's key is
// groupDir + its id.
func groupDir(prefix, name string) string {
	return prefix + "/" + strings.TrimPrefix(name, "/") + "/" + memberMarker
}

// newGUID returns 32 random hex digits: the identity of one attempt's key.
func newGUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// parseURL splits etcd://host:port[,host:port...][/prefix] into endpoints
// and the key prefix ("" when the URL has no path or only "/"). Its errors
// show raw with any password hidden (userinfo.Redact), and quote an endpoint
// only when nothing was hidden: in "etcd://u:pa/ss@h:1" the first endpoint
// is "u:pa".
func parseURL(raw string) (endpoints []string, prefix string, err error) {
	shown := userinfo.Redact(raw)
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrBadURL, shown, why) }
	badEndpoint := func(h, why string) error {
		if shown != raw { // h and why (net's errors quote h) may hold a part of the password
			return bad("an endpoint is not host:port with a port from 1 to 65535")
		}
		return bad(fmt.Sprintf("endpoint %q: %s", h, why))
	}
	rest, ok := cutScheme(raw)
	if !ok {
		return nil, "", bad(`want etcd[s]://host:port[,host:port...][/prefix]`)
	}
	if strings.ContainsAny(rest, "?#") {
		return nil, "", bad("a query or fragment is not supported")
	}
	hosts, path, _ := strings.Cut(rest, "/")
	if strings.Contains(hosts, "@") {
		return nil, "", bad("credentials in the URL are not supported: give NewSession a client configured with them")
	}
	for _, h := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			return nil, "", badEndpoint(h, err.Error())
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
			return nil, "", badEndpoint(h, "want host:port with a port from 1 to 65535")
		}
		endpoints = append(endpoints, h)
	}
	if path = strings.TrimSuffix(path, "/"); path != "" {
		prefix = "/" + path
		if why := checkPrefix(prefix); why != "" {
			return nil, "", bad("prefix " + why)
		}
	}
	return endpoints, prefix, nil
}
