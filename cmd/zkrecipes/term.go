package main

import (
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// Output of data zkrecipes did not write (node data, node names, holder
// names): any participant of a lock can put bytes there, and a terminal
// obeys the escape sequences among them (colours, cursor moves, window
// titles, OSC 52 clipboard writes, hyperlinks) and bidi overrides reorder
// what it shows. Text output escapes them; JSON output keeps them as \u
// escapes, so a decoder still gets the original text.

// termSafe returns s as it may go to a terminal: s itself when every rune
// is printable and it has no backslash or double quote, else s quoted as a
// Go string ("\x1b[31m", "\u202e"), so an unquoted value is always the
// data as it is. C0 and C1 controls, DEL, bidi overrides and other format
// characters, line and paragraph separators and invalid UTF-8 are all
// not printable (strconv.IsPrint).
func termSafe(s string) string {
	if plain(s) {
		return s
	}
	return strconv.Quote(s)
}

// plain reports whether s is valid UTF-8 of printable runes without a
// backslash or a double quote.
func plain(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r == '\\' || r == '"' || !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// jsonSafe escapes, in JSON text b, every rune that is not printable and
// that encoding/json and log/slog leave as it is (DEL, C1 controls, bidi
// overrides and other format characters: they escape only C0 controls and
// invalid UTF-8), as \uXXXX (a surrogate pair above U+FFFF). Such a rune
// can only stand inside a JSON string, where the escape means the same
// rune: the document stays valid and decodes to the same values.
func jsonSafe(b []byte) []byte {
	var out []byte
	done := 0
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r >= utf8.RuneSelf && r != utf8.RuneError && !strconv.IsPrint(r) || r == 0x7f {
			out = append(out, b[done:i]...)
			out = appendEscape(out, r)
			done = i + n
		}
		i += n
	}
	if out == nil {
		return b
	}
	return append(out, b[done:]...)
}

// appendEscape appends JSON's \u escape of r.
func appendEscape(out []byte, r rune) []byte {
	if r > 0xffff {
		r -= 0x10000
		return fmt.Appendf(out, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
	}
	return fmt.Appendf(out, `\u%04x`, r)
}

// jsonWriter is w with jsonSafe applied to everything written: for writers
// that are given whole JSON documents or lines, as slog's JSON handler and
// a json.Encoder write them (a rune split between two writes would be
// passed as it is).
type jsonWriter struct{ w io.Writer }

func (j jsonWriter) Write(p []byte) (int, error) {
	if _, err := j.w.Write(jsonSafe(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
