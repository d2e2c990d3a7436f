package userinfo

import "strings"

// IsKeywordValue reports whether raw is a keyword/value connection string
// ("host=db password=pw", PostgreSQL's other form besides a URL): its text
// before the first '=' is one keyword (letters, digits, '_', with spaces
// around it), which no URL and no ZooKeeper server list is.
func IsKeywordValue(raw string) bool {
	eq := strings.IndexByte(raw, '=')
	if eq < 0 {
		return false
	}
	k := strings.TrimSpace(raw[:eq])
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// isSpace is libpq's set of spaces between keywords and values.
func isSpace(c byte) bool { return strings.IndexByte(" \t\n\r\v\f", c) >= 0 }

func trimSpace(raw string, i int) int {
	for i < len(raw) && isSpace(raw[i]) {
		i++
	}
	return i
}

// keywordSpans returns the spans of the values of raw's secret keywords,
// reading raw as libpq and pgx do: keyword, optional spaces, '=', optional
// spaces, then a value that is either single-quoted (a backslash escapes
// the next byte, \' among them) or runs to the next space (a backslash
// escapes the next byte there too). Where raw stops being such a string
// after a secret keyword (a keyword with a space in it, an unterminated
// quote), the rest of raw is hidden.
func keywordSpans(raw string) []span {
	var spans []span
	for i := trimSpace(raw, 0); i < len(raw); {
		eq := strings.IndexByte(raw[i:], '=')
		if eq < 0 {
			return spans
		}
		key := strings.TrimRight(raw[i:i+eq], " \t\n\r\v\f")
		if strings.ContainsAny(key, " \t\n\r\v\f") { // not keyword/value from here on
			if secretKey(key) {
				spans = append(spans, span{i, len(raw), raw[i:]})
			}
			return spans
		}
		v := trimSpace(raw, i+eq+1)
		end, val, ok := value(raw, v)
		if secretKey(key) && end > v {
			if !ok {
				end = len(raw)
			}
			spans = append(spans, span{v, end, val})
		}
		if !ok {
			return spans
		}
		i = trimSpace(raw, end)
	}
	return spans
}

// value reads the value that starts at raw[i:], and returns where it ends,
// its text without quotes and escapes, and whether it was well formed.
func value(raw string, i int) (end int, val string, ok bool) {
	var b strings.Builder
	quoted := i < len(raw) && raw[i] == '\''
	j := i
	if quoted {
		j++
	}
	for ; j < len(raw); j++ {
		c := raw[j]
		switch {
		case quoted && c == '\'':
			return j + 1, b.String(), true
		case !quoted && isSpace(c):
			return j, b.String(), true
		case c == '\\':
			j++
			if j == len(raw) {
				return j, b.String(), !quoted
			}
			c = raw[j]
		}
		b.WriteByte(c)
	}
	return j, b.String(), !quoted
}
