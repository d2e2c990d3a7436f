package fencetest

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
)

// RunBadCalls: the tokens and resource names every fence refuses before
// sending anything (a zero token, one above fence.MaxToken, a name
// fence.CheckResource refuses). do is a fenced call with no writes; the
// caller checks that nothing was written.
func RunBadCalls(t *testing.T, do func(ctx context.Context, resource string, t fence.Token) error) {
	t.Helper()
	for _, c := range []struct {
		name     string
		resource string
		tok      fence.Token
		want     error
	}{
		{"zero token", "r", 0, fence.ErrNoToken},
		{"token above MaxToken", "r", fence.MaxToken + 1, fence.ErrTokenOverflow},
		{"largest uint64", "r", math.MaxUint64, fence.ErrTokenOverflow},
		{"empty resource", "", 1, fence.ErrBadResource},
		{"NUL in resource", "a\x00b", 1, fence.ErrBadResource},
		{"invalid UTF-8", "a\xffb", 1, fence.ErrBadResource},
		{"long resource", strings.Repeat("r", fence.MaxResourceLen+1), 1, fence.ErrBadResource},
	} {
		if err := do(context.Background(), c.resource, c.tok); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}
