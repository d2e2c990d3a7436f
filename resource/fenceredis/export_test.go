package fenceredis

import (
	"context"

	"github.com/zkrecipes/zkrecipes/fence"
)

// DoUnchecked is Do without each Write's own check (argument counts), so
// that a test can plant a write that fails in the middle of the script.
func DoUnchecked(ctx context.Context, f *Fence, resource string, token fence.Token, writes ...Write) (fence.Token, error) {
	return f.do(ctx, resource, token, writes)
}
