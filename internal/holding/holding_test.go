package holding

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
)

func TestSet(t *testing.T) {
	var s Set
	for _, c := range []struct {
		kind  string
		token fence.Token
		delta int
		n     int
		max   fence.Token
	}{
		{"lock", 5, +1, 1, 5},
		{"lock", 7, +1, 2, 7},
		{"read", 3, +1, 1, 3}, // another kind: its own count
		{"lock", 7, -1, 1, 5},
		{"lock", 9, -1, 1, 5}, // a -1 without its +1: ignored
		{"lock", 5, -1, 0, 0},
	} {
		s.Add(c.kind, "/p", c.token, c.delta, func(n int, m fence.Token) {
			if n != c.n || m != c.max {
				t.Fatalf("Add(%s, %v, %+d) = %d, %v; want %d, %v", c.kind, c.token, c.delta, n, m, c.n, c.max)
			}
		})
	}
	if len(s.live) != 1 {
		t.Fatalf("left %v", s.live)
	}
}
