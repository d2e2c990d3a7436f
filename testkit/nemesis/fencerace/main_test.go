package fencerace_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

func TestMain(m *testing.M) { zktest.MainThen(m, pgtest.StopShared) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
