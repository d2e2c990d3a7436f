package fencesql

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Update appends its own placeholders (the token, the key) after the
// caller's set clause, numbered after len(args). A placeholder in the set
// clause beyond len(args) binds one of them into the caller's column, so
// Update counts the set clause's placeholders first, and must count them
// exactly as the database will.
//
// A lexer that mirrors the databases' cannot promise that: where a comment
// or a string ends depends on the database (PostgreSQL ends a -- comment
// at \r too, SQLite at \n only; PostgreSQL nests /* */, SQLite does not and
// accepts one left open), on the server's settings (with
// standard_conforming_strings off, '\' does not end in PostgreSQL) and on
// its version (PostgreSQL 16 reads $1_0 as $10). So setParams accepts only
// set clauses in which nothing's extent is in doubt, and refuses the rest
// with ErrPlaceholders:
//
//   - no comments (-- or /*), no backslash anywhere, no statement
//     separator (;), no { }, no control character but tab, \n and \r, and
//     no non-ASCII byte outside quotes;
//   - strings '…' and quoted identifiers "…" (SQLite also […] and `…`):
//     with no backslash, each ends at its next quote in every database,
//     under every setting and prefix (E, U&, B, X, N); a doubled quote is
//     two adjacent quoted runs, which covers the same bytes;
//   - no dollar quotes: a PostgreSQL $ must start a placeholder $n that
//     touches no identifier or number on either side;
//   - SQLite: ?, ?n (1 to 32766), and :name, @name, $name without Tcl
//     suffixes (( ) or ::), touching no identifier on the left; no #;
//   - parentheses (and PostgreSQL's brackets) balanced, so that what
//     Update appends is outside any of them.
//
// Values that need what is refused (a backslash, a comment) go in args.

// maxSQLiteParam is SQLite's default SQLITE_MAX_VARIABLE_NUMBER.
const maxSQLiteParam = 32766

// setParams returns the number of parameters the set clause s binds in
// dialect d (PostgreSQL: the highest $n; SQLite: the highest index, ? and
// a new name taking the next one), or an error saying what makes s
// ambiguous.
func (d Dialect) setParams(s string) (int, error) {
	if !utf8.ValidString(s) {
		return 0, fmt.Errorf("not valid UTF-8")
	}
	sc := setScanner{d: d, s: s, names: map[string]bool{}}
	for sc.i < len(s) {
		if err := sc.step(); err != nil {
			return 0, fmt.Errorf("%w at byte %d", err, sc.i)
		}
	}
	if sc.depth != 0 {
		return 0, fmt.Errorf("unbalanced parentheses or brackets")
	}
	return sc.high, nil
}

// setScanner is setParams' state.
type setScanner struct {
	d     Dialect
	s     string
	i     int             // the next byte
	high  int             // the highest parameter index so far
	depth int             // open ( and [
	names map[string]bool // SQLite's named parameters seen
}

// step consumes one token or byte of s.
func (sc *setScanner) step() error {
	s, i, c := sc.s, sc.i, sc.s[sc.i]
	next := byte(0)
	if i+1 < len(s) {
		next = s[i+1]
	}
	switch {
	case c == '\'' || c == '"' || sc.d == SQLite && (c == '`' || c == '['):
		end := byte(c)
		if c == '[' {
			end = ']'
		}
		return sc.quoted(end)
	case c == '-' && next == '-', c == '/' && next == '*':
		return fmt.Errorf("a comment (%c%c)", c, next)
	case c == '\\' || c == ';' || c == '{' || c == '}' || c == '`' || c >= 0x80:
		return fmt.Errorf("%q", rune(c))
	case c < ' ' && c != '\t' && c != '\n' && c != '\r' || c == 0x7f:
		return fmt.Errorf("control character %q", rune(c))
	case c == '(' || sc.d == Postgres && c == '[':
		sc.depth++
	case c == ')' || sc.d == Postgres && c == ']':
		if sc.depth--; sc.depth < 0 {
			return fmt.Errorf("unbalanced %c", c)
		}
	case sc.d == SQLite && c == ']':
		return fmt.Errorf("unbalanced ]")
	case sc.d == Postgres && c == '$':
		return sc.pgParam()
	case sc.d == SQLite && c == '?':
		return sc.sqliteNumbered()
	case sc.d == SQLite && (c == ':' || c == '@' || c == '$'):
		return sc.sqliteNamed()
	case sc.d == SQLite && c == '#':
		return fmt.Errorf("#")
	}
	sc.i++
	return nil
}

// quoted consumes a string or quoted identifier ending at the next end.
func (sc *setScanner) quoted(end byte) error {
	for j := sc.i + 1; j < len(sc.s); j++ {
		switch sc.s[j] {
		case end:
			sc.i = j + 1
			return nil
		case '\\':
			return fmt.Errorf("a backslash in a quoted string or name")
		case 0:
			return fmt.Errorf("a NUL byte")
		}
	}
	return fmt.Errorf("unterminated %c…%c", sc.s[sc.i], end)
}

// pgParam consumes $n.
func (sc *setScanner) pgParam() error {
	j := sc.digits(sc.i + 1)
	if j == sc.i+1 {
		return fmt.Errorf("$ that is not a placeholder $n (dollar quotes are not allowed)")
	}
	if err := sc.alone(j); err != nil {
		return err
	}
	n, err := strconv.Atoi(sc.s[sc.i+1 : j])
	if err != nil || n == 0 {
		return fmt.Errorf("placeholder %s", sc.s[sc.i:j])
	}
	sc.high, sc.i = max(sc.high, n), j
	return nil
}

// sqliteNumbered consumes ? or ?n.
func (sc *setScanner) sqliteNumbered() error {
	j := sc.digits(sc.i + 1)
	if err := sc.alone(j); err != nil {
		return err
	}
	n := sc.high + 1
	if j > sc.i+1 {
		var err error
		if n, err = strconv.Atoi(sc.s[sc.i+1 : j]); err != nil || n < 1 || n > maxSQLiteParam {
			return fmt.Errorf("placeholder %s (1 to %d)", sc.s[sc.i:j], maxSQLiteParam)
		}
	}
	sc.high, sc.i = max(sc.high, n), j
	return nil
}

// sqliteNamed consumes :name, @name or $name.
func (sc *setScanner) sqliteNamed() error {
	j := sc.i + 1
	for j < len(sc.s) && identChar(sc.s[j]) {
		j++
	}
	if j == sc.i+1 {
		return fmt.Errorf("%c that starts no parameter name", sc.s[sc.i])
	}
	if j < len(sc.s) && (sc.s[j] == '(' || sc.s[j] == ':') {
		return fmt.Errorf("parameter %s followed by %c (a Tcl variable)", sc.s[sc.i:j], sc.s[j])
	}
	if err := sc.alone(j); err != nil {
		return err
	}
	if name := sc.s[sc.i:j]; !sc.names[name] {
		sc.names[name] = true
		sc.high++
	}
	sc.i = j
	return nil
}

// alone refuses a parameter from sc.i to end that touches an identifier or
// a number: on the left, the databases disagree on where a name ends ($ is
// an identifier character, 1$2 is one token or two by version); on the
// right, PostgreSQL 16 reads $1_0 as $10.
func (sc *setScanner) alone(end int) error {
	if sc.i > 0 && identChar(sc.s[sc.i-1]) || end < len(sc.s) && identChar(sc.s[end]) {
		return fmt.Errorf("placeholder %s touching a name or number", sc.s[sc.i:end])
	}
	return nil
}

func (sc *setScanner) digits(j int) int {
	for j < len(sc.s) && isDigit(sc.s[j]) {
		j++
	}
	return j
}

// identChar reports whether c can continue an unquoted identifier or
// number (both databases allow $ after the first character, and any
// non-ASCII byte).
func identChar(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c >= 0x80
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
