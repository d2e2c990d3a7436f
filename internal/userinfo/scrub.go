package userinfo

import (
	"slices"
	"strings"
)

// minPiece is the shortest secret searched for in a text (Scrub, Hide, and
// Redact's second pass), and the shortest part of a password that Secrets
// lists on its own: a shorter one would match inside ordinary words of a
// message and so spell itself out ("sessixxxxx cxxxxxnected" for the
// password "on"). Such a password is hidden only where it stands, by
// Redact's positional pass.
const minPiece = 4

// Secrets returns the passwords that Redact hides in raw, each as written
// and as a driver reads it (unescaped, percent-decoded), and, for one that
// holds a character a URL parser splits at ('/', '?', '#', '@', ':', '&',
// '='), each of its parts of at least 4 bytes: a driver that misreads the
// string quotes such parts (the host "u:pa" of "redis://u:pa/ss@h").
// Empty values are left out.
func Secrets(raw string) []string { return secrets(raw, find(raw)) }

func secrets(raw string, spans []span) []string {
	var out []string
	add := func(s string) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, s := range spans {
		for _, v := range []string{raw[s.start:s.end], s.value} {
			add(v)
			if strings.ContainsAny(v, "/?#@:&=") {
				for _, p := range strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune("/?#@:&=", r) }) {
					if len(p) >= minPiece {
						add(p)
					}
				}
			}
		}
	}
	return out
}

// Scrub returns text with every occurrence of each of secrets replaced by
// Mask, the longest first (so that a secret that holds another is hidden
// whole). Secrets shorter than 4 bytes are ignored: searched for, they
// would be found inside ordinary words, and the masked message would show
// where, that is, the secret (see minPiece).
func Scrub(text string, secrets ...string) string {
	s := slices.DeleteFunc(slices.Clone(secrets), short)
	slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
	for _, v := range s {
		text = strings.ReplaceAll(text, v, Mask)
	}
	return text
}

// short reports whether secret v is too short to be searched for.
func short(v string) bool { return len(v) < minPiece }

// Hide returns err with its message scrubbed of secrets (Scrub); errors.Is
// and errors.As see through it to err. It returns err itself when err is
// nil or no secret is long enough to be searched for (4 bytes). It is for errors a driver made, whose
// text is not ours to vouch for: a caller that unwraps and prints err's
// parts itself gets the driver's text as it was.
//
// The message is scrubbed here, once: the error keeps it and err, never
// the secrets, which a struct walker (%#v, go-spew, a debugger, a panic
// reporter) would otherwise find in it. err itself must hold none in its
// fields (the caller's business: pglock's ConnectError.Config).
func Hide(err error, secrets ...string) error {
	if err == nil || !slices.ContainsFunc(secrets, func(s string) bool { return !short(s) }) {
		return err
	}
	return &hidden{err: err, msg: Scrub(err.Error(), secrets...)}
}

// hidden is Hide's error: err's message, scrubbed.
type hidden struct {
	err error
	msg string
}

func (h *hidden) Error() string { return h.msg }
func (h *hidden) Unwrap() error { return h.err }
