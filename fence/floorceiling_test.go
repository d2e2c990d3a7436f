package fence_test

import (
	"context"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/testkit/fencetest"
)

// TestGuardFloorCeiling: fencetest's floors no era reaches, on a Guard.
func TestGuardFloorCeiling(t *testing.T) {
	var g fence.Guard
	fencetest.RunFloorCeiling(t, func(_ context.Context, resource string, floor fence.Token) (fence.Token, error) {
		return g.RaiseFloor(resource, floor)
	}, func(_ context.Context, resource string, tok fence.Token) error {
		return g.Check(resource, tok)
	})
}
