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
		return "", "", refuse(ErrInvalidNamespace, fmt.Sprintf("the namespace %q %s", ns, why))
	}
	switch {
	case strings.Contains(name, "/"):
		return "", "", refuse(ErrInvalidName, "more than one \"/\": write namespace/name, or a bare name (a Lease name holds no \"/\")")
	case name == "":
		return "", "", refuse(ErrInvalidName, "empty Lease name: write namespace/name, or a bare name")
	case len(validation.IsDNS1123Subdomain(name)) > 0:
		return "", "", refuse(ErrInvalidName, fmt.Sprintf("the Lease name %q is not a DNS subdomain: "+
			"at most 253 bytes of lowercase letters, digits, \"-\" and \".\", starting and ending with a letter or digit", name))
	}
	return ns, name, nil
}

// nameRules are the shared lock-name rules, for what every backend refuses.
var nameRules = lockname.Rules{Backend: "k8slease", MaxLen: MaxNameLen, Err: ErrInvalidName}

// checkNamespace returns why ns is not a namespace ("" if it is one), to
// follow the namespace: "is empty", "is not a DNS label: ...".
func checkNamespace(ns string) string {
	if ns == "" {
		return "is empty"
	}
	if len(validation.IsDNS1123Label(ns)) > 0 {
		return "is not a DNS label: at most 63 bytes of lowercase letters, digits and \"-\", starting and ending with a letter or digit"
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
