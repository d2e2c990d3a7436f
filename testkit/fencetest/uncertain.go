package fencetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// RunUncertain: the connection breaks after the server applied a fenced
// write and before its answer arrived: the write says fence.ErrUncertain,
// the data is there, and the same token is accepted again; a ctx already
// ended sends nothing and is not uncertain. p carries do's connections;
// do is a fenced call of resource "r" with tok that writes value to the
// data get reads (value "": no write).
func RunUncertain(t *testing.T, p *serverkit.FaultProxy, do func(ctx context.Context, tok fence.Token, value string) error, get func() string) {
	t.Helper()
	ctx := context.Background()
	if err := do(ctx, 3, ""); err != nil { // connected
		t.Fatal(err)
	}
	p.SetLatency(400 * time.Millisecond) // each way: time to see the write land, then cut
	// An attempt whose answer arrived before the cut (a slow poll on a
	// loaded machine) proves nothing: try again with the next token.
	tok := fence.Token(3)
	for attempt := 1; ; attempt++ {
		tok++
		err := lostAnswer(t, p, func(ctx context.Context, v string) error { return do(ctx, tok, v) }, get, fmt.Sprint("v", tok))
		if err == nil && attempt < 3 {
			t.Logf("attempt %d: the answer arrived before the cut; again", attempt)
			p.Resume()
			continue
		}
		if !errors.Is(err, fence.ErrUncertain) {
			t.Fatalf("answer lost: %v, want fence.ErrUncertain", err)
		}
		break
	}
	p.SetLatency(0)
	p.Resume()
	if err := do(ctx, tok, "again"); err != nil {
		t.Fatalf("the same token after the uncertain write: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := do(cctx, 5, ""); !errors.Is(err, context.Canceled) || errors.Is(err, fence.ErrUncertain) {
		t.Fatalf("cancelled ctx: %v", err)
	}
}

// lostAnswer runs write(value) with p's latency set, waits until get
// returns value (the server applied it), cuts p's connections and returns
// write's error.
func lostAnswer(t *testing.T, p *serverkit.FaultProxy, write func(context.Context, string) error, get func() string, value string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- write(ctx, value)
	}()
	for deadline := time.Now().Add(10 * time.Second); get() != value; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the write did not land")
		}
	}
	p.Cut()
	return <-done
}
