package fenceredis_test

import (
	"context"
	"testing"

	"github.com/zkrecipes/zkrecipes/resource/fenceredis"
	"github.com/zkrecipes/zkrecipes/testkit/fencetest"
)

// TestAdmit: fencetest's Admit scenario with AddWrites (the writes write adds
// land with the token, or not at all).
func TestAdmit(t *testing.T) {
	e := newEnv(t)
	data := e.prefix + "data"
	f := e.fence(t)
	onStale, reported := fencetest.CountStale()
	f.OnStale = onStale
	fencetest.RunAdmit(t, fencetest.Admit{
		Fence:      f,
		Reported:   reported,
		Add:        func(ctx context.Context, v string) error { return fenceredis.AddWrites(ctx, fenceredis.Set(data, v)) },
		AddBad:     func(ctx context.Context) error { return fenceredis.AddWrites(ctx, fenceredis.Del(e.prefix+"fence:r")) },
		ErrBad:     fenceredis.ErrBadWrite,
		ErrNoBatch: fenceredis.ErrNoBatch,
		Get:        func() string { return e.get(t, data) },
	})
}
