package fencesql

import (
	"fmt"
	"strconv"
	"strings"
)

// Update appends its own placeholders (the token, the key) after the
// caller's set clause, numbered after len(args). A set clause that uses a
// placeholder beyond len(args) would silently bind one of them into the
// caller's column, so Update counts the set clause's placeholders first,
// the way each database's tokenizer sees them: not inside string literals,
// quoted identifiers or comments.

// highestParam returns the highest parameter index that the SQL fragment
// s uses in dialect d, or an error for a string literal, quoted identifier
// or comment that does not end (the statement Update builds would go on
// inside it).
//
// PostgreSQL: $n; '…' (standard_conforming_strings on, the default since
// 9.1), E'…' with backslash escapes, "…", $tag$…$tag$, -- and nested /* */
// comments; a $ inside an identifier (a$1) is part of it.
//
// SQLite: ?NNN is index NNN; ?, and a :name, @name or $name not seen
// before, take the highest index so far plus one; '…', "…", `…`, […], --
// and /* */ comments.
func (d Dialect) highestParam(s string) (int, error) {
	high := 0
	names := map[string]bool{} // SQLite's named parameters seen
	for i := 0; i < len(s); {
		c := s[i]
		next := byte(0)
		if i+1 < len(s) {
			next = s[i+1]
		}
		var err error
		switch {
		case c == '\'':
			esc := d == Postgres && i > 0 && (s[i-1] == 'e' || s[i-1] == 'E') && (i < 2 || !identChar(s[i-2]))
			i, err = skipQuoted(s, i, '\'', esc)
		case c == '"' || d == SQLite && c == '`':
			i, err = skipQuoted(s, i, c, false)
		case d == SQLite && c == '[':
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return 0, fmt.Errorf("unterminated [identifier] at byte %d", i)
			}
			i += end + 1
		case c == '-' && next == '-':
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return high, nil // ends at the end of s: Update puts a newline after it
			}
			i += end + 1
		case c == '/' && next == '*':
			i, err = skipComment(s, i, d == Postgres)
		case d == Postgres && c == '$' && (i == 0 || !identChar(s[i-1])):
			if isDigit(next) {
				j := i + 1
				for j < len(s) && isDigit(s[j]) {
					j++
				}
				n, err := strconv.Atoi(s[i+1 : j])
				if err != nil {
					return 0, fmt.Errorf("placeholder %s at byte %d: %w", s[i:j], i, err)
				}
				high, i = max(high, n), j
				continue
			}
			i, err = skipDollarQuoted(s, i)
		case d == SQLite && c == '?':
			j := i + 1
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			n := high + 1
			if j > i+1 {
				if n, err = strconv.Atoi(s[i+1 : j]); err != nil {
					return 0, fmt.Errorf("placeholder %s at byte %d: %w", s[i:j], i, err)
				}
			}
			high, i = max(high, n), j
		case d == SQLite && (c == ':' || c == '@' || c == '$' && (i == 0 || !identChar(s[i-1]))) && identChar(next):
			j := i + 1
			for j < len(s) && identChar(s[j]) {
				j++
			}
			if !names[s[i:j]] {
				names[s[i:j]] = true
				high++
			}
			i = j
		default:
			i++
		}
		if err != nil {
			return 0, err
		}
	}
	return high, nil
}

// skipQuoted returns the index after the literal or quoted identifier that
// starts at s[i] with quote q (doubled inside it; after a backslash too if
// backslash).
func skipQuoted(s string, i int, q byte, backslash bool) (int, error) {
	for j := i + 1; j < len(s); j++ {
		switch {
		case backslash && s[j] == '\\':
			j++
		case s[j] == q && j+1 < len(s) && s[j+1] == q:
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated %c…%c at byte %d", q, q, i)
}

// skipComment returns the index after the /* */ comment at s[i], nested
// ones included if nested (PostgreSQL).
func skipComment(s string, i int, nested bool) (int, error) {
	depth := 0
	for j := i; j+1 < len(s); j++ {
		switch {
		case s[j] == '/' && s[j+1] == '*' && (nested || depth == 0):
			depth++
			j++
		case s[j] == '*' && s[j+1] == '/':
			depth--
			j++
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unterminated /* comment at byte %d", i)
}

// skipDollarQuoted returns the index after the $tag$…$tag$ string at s[i],
// or i+1 if s[i] starts none (a lone $).
func skipDollarQuoted(s string, i int) (int, error) {
	j := i + 1
	for j < len(s) && identChar(s[j]) && s[j] != '$' {
		j++
	}
	if j >= len(s) || s[j] != '$' || j > i+1 && isDigit(s[i+1]) {
		return i + 1, nil
	}
	tag := s[i : j+1]
	end := strings.Index(s[j+1:], tag)
	if end < 0 {
		return 0, fmt.Errorf("unterminated %s string at byte %d", tag, i)
	}
	return j + 1 + end + len(tag), nil
}

// identChar reports whether c can continue an unquoted identifier (both
// databases allow $ after the first character, and any non-ASCII byte).
func identChar(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c >= 0x80
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
