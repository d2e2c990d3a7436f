package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// TestDemoScenes runs every scene of the demo against a real server: every
// invariant the demo prints must hold (the same checks make the demo exit
// non-zero).
func TestDemoScenes(t *testing.T) {
	cl := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := &demo{start: time.Now(), logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		servers: cl.Servers(), root: "/demo"}
	if !d.kleppmann(ctx) {
		t.Fatal("scene 1 (stale holder) violated an invariant")
	}
	if !d.contention(ctx, 4, 10) {
		t.Fatal("scene 2 (contention) violated an invariant")
	}
	if !d.leaderElection(ctx) {
		t.Fatal("scene 3 (leader election) violated an invariant")
	}
}
