package fencerace_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencezk"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/fencerace"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// newRegister returns a fencezk.Register on path over a session of its own.
func newRegister(t *testing.T, cl *zktest.Cluster, path string) *fencezk.Register {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := zookeeper.Connect(ctx, cl.Servers(), zookeeper.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r, err := fencezk.New(s, path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestZnodeRegisterRace (fencezk's TestRegisterRace, here for porcupine's
// sake): writers on separate sessions race with interleaved
// tokens (older, equal, newer). The history (each accepted write's order is
// its data version) must pass the nemesis register check, and the znode
// must end with the last accepted write, which carries the highest token.
func TestZnodeRegisterRace(t *testing.T) {
	cl := zktest.Shared(t)
	const writers = 6
	regs := make([]*fencezk.Register, writers)
	for i := range regs {
		regs[i] = newRegister(t, cl, "/race")
	}
	// The order of application: the new data version, from 1.
	write := func(w int) fencerace.Writer {
		return func(ctx context.Context, tok fence.Token, value string) (nemesis.State, int64, error) {
			prev, err := regs[w].Write(ctx, tok, []byte(value))
			return nemesis.State{Token: prev.Token, Value: string(prev.Data)}, int64(prev.Version) + 2, err
		}
	}
	ops, end := fencerace.RunEach(t, fencerace.Config{Register: "znode", Workers: writers, For: 2 * time.Second, Seed: 3}, write)
	for _, v := range nemesis.CheckRegister("znode", ops, end) {
		t.Error(v)
	}
	var last nemesis.Op
	top, n := fence.Token(0), map[nemesis.Outcome]int{}
	for _, o := range ops {
		n[o.Outcome]++
		if o.Outcome == nemesis.Accepted {
			top = max(top, o.Token)
			if o.Seq > last.Seq {
				last = o
			}
		}
	}
	v, err := regs[0].Read(context.Background())
	if err != nil || v.Token != top || string(v.Data) != last.Value || int64(v.Version)+1 != last.Seq {
		t.Fatalf("final %+v (%v); want the last accepted write %v with token %v", v, err, last, top)
	}
	if n[nemesis.Stale] == 0 || n[nemesis.Accepted] == 0 {
		t.Fatalf("no mix of outcomes: %v", n)
	}
	t.Logf("%d writes by %d writers in 2 s: %d accepted, %d stale; final token %v, version %d", len(ops), writers, n[nemesis.Accepted], n[nemesis.Stale], v.Token, v.Version)
}
