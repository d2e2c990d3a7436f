package k8slease

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/zkrecipes/zkrecipes/internal/lockname"
)

// MaxNameLen is the longest "namespace/name" New accepts, in bytes: a
// namespace of 63 bytes, the slash and a Lease name of 253.
const MaxNameLen = 63 + 1 + 253

// splitName splits a lock's "namespace/name" (or bare "name", in ns) and
// checks both parts as the API server would, so that a bad one is refused
// before anything is sent: the namespace a DNS label, the name a DNS
// subdomain (RFC 1123).
func splitName(full, ns string) (namespace, name string, err error) {
	refuse := func(sentinel error, why string) error {
		return &NameError{Backend: "k8slease", Name: full, Reason: why, Err: sentinel}
	}
	if len(full) > MaxNameLen || !utf8.ValidString(full) || strings.IndexByte(full, 0) >= 0 {
		// The shared rules word these the same way on every backend.
		return "", "", nameRules.Check(full)
	}
	name = full
	if n, rest, ok := strings.Cut(full, "/"); ok {
		ns, name = n, rest
	}
	if why := checkNamespace(ns); why != "" {
		return "", "", refuse(ErrInvalidNamespace, "namespace "+why)
	}
	if name == "" {
		return "", "", refuse(ErrInvalidName, "empty Lease name")
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", "", refuse(ErrInvalidName, "Lease name "+strings.Join(msgs, "; "))
	}
	return ns, name, nil
}

// nameRules are the shared lock-name rules, for what every backend refuses.
var nameRules = lockname.Rules{Backend: "k8slease", MaxLen: MaxNameLen, Err: ErrInvalidName}

// checkNamespace returns why ns is not a namespace ("" if it is one).
func checkNamespace(ns string) string {
	if ns == "" {
		return "empty"
	}
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return strings.Join(msgs, "; ")
	}
	return ""
}

// checkIdentity returns why p is not an identity prefix ("" if it is one).
func checkIdentity(p string) string {
	if len(p) > MaxIdentityLen {
		return fmt.Sprintf("%d bytes, longer than MaxIdentityLen (%d)", len(p), MaxIdentityLen)
	}
	if !utf8.ValidString(p) {
		return "not valid UTF-8"
	}
	for _, r := range p {
		if !unicode.IsPrint(r) {
			return fmt.Sprintf("unprintable character %U", r)
		}
	}
	return ""
}

// newIdentity returns a Session's identity: prefix (default: the host
// name) and 64 random bits in hex, so that no two Sessions share one.
func newIdentity(prefix string) string {
	if prefix == "" {
		prefix, _ = os.Hostname()
		if prefix == "" {
			prefix = "k8slease"
		}
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + "_" + hex.EncodeToString(b[:])
}
