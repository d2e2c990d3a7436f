package fenceredis_test

import (
	"context"
	"testing"

	"github.com/zkrecipes/zkrecipes/resource/fenceredis"
	"github.com/zkrecipes/zkrecipes/testkit/fencetest"
)

// TestHTTPHandler: the fence behind fencehttp's handler on a real HTTP
// server (fencetest.RunHTTP), its handler adding its write with AddWrites.
func TestHTTPHandler(t *testing.T) {
	e := newEnv(t)
	data := e.prefix + "data"
	add := func(ctx context.Context, body string) error {
		return fenceredis.AddWrites(ctx, fenceredis.Set(data, body))
	}
	fencetest.RunHTTP(t, e.fence(t), add, func() string { return e.get(t, data) })
}
