// Package fencerace is the concurrency proof of a fence, split out of
// testkit/fencetest because it checks with the nemesis engine's register
// check (porcupine), which the root module's tests must not reach: writers
// with interleaved tokens (older, equal, newer) write one register; every
// call and its answer is a nemesis.Op, and the history must pass
// nemesis.CheckRegister (no write over a higher token, no lost update, each
// accepted write over the state the previous one left, and linearizable
// with porcupine), with the final state the last accepted write. A planted
// bug run through the same Run and Verify must fail them. Its own tests
// are the concurrent runs of the root module's fencezk.Register and of
// module resource/fencesql.
package fencerace

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
)

// Writer is one fenced write of value with tok: the state it overwrote and
// its place in the order of application (0: found later, from a log), or
// its error (a *fence.StaleError for a refused token).
type Writer func(ctx context.Context, tok fence.Token, value string) (prev nemesis.State, seq int64, err error)

// Config is the shape of a concurrent run.
type Config struct {
	Register string        // the register's name in the history and the log
	Workers  int           // concurrent writers
	For      time.Duration // length of the run
	Seed     uint64        // second word of each writer's PCG seed (the first is its number)
}

// Run drives w from c.Workers goroutines for c.For, each picking tokens
// older (30%), equal (40%) or newer (30%) than the newest handed out, and
// returns the history and its end. A stale answer must name a highest
// token above the refused one; any other error ends that writer with a
// test error.
func Run(t testing.TB, c Config, w Writer) (ops []nemesis.Op, end time.Duration) {
	return RunEach(t, c, func(int) Writer { return w })
}

// RunEach is Run with a Writer of its own for each writer n (from 0), for
// backends whose writers need separate sessions.
func RunEach(t testing.TB, c Config, each func(n int) Writer) (ops []nemesis.Op, end time.Duration) {
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		newest atomic.Uint64
	)
	newest.Store(10)
	start := time.Now()
	deadline := start.Add(c.For)
	for n := range c.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := each(n)
			rng := rand.New(rand.NewPCG(uint64(n), c.Seed))
			for i := 0; time.Now().Before(deadline); i++ {
				var tok fence.Token
				switch r := rng.IntN(10); {
				case r < 3:
					tok = fence.Token(max(newest.Load()-uint64(1+rng.IntN(3)), 1))
				case r < 7:
					tok = fence.Token(newest.Load())
				default:
					tok = fence.Token(newest.Add(1))
				}
				op := nemesis.Op{Kind: nemesis.OpWrite, Client: n, Token: tok, Register: c.Register, Value: fmt.Sprintf("w%d-%d", n, i), Call: time.Since(start)}
				prev, seq, err := w(context.Background(), tok, op.Value)
				op.Return = time.Since(start)
				var se *fence.StaleError
				switch {
				case err == nil:
					op.Outcome, op.Prev, op.Seq = nemesis.Accepted, prev, seq
				case errors.Is(err, fence.ErrStale):
					op.Outcome = nemesis.Stale
					if errors.As(err, &se) && se.Highest <= tok {
						t.Errorf("stale answer for token %v names highest %v", tok, se.Highest)
					}
				default:
					t.Errorf("write: %v", err)
					return
				}
				mu.Lock()
				ops = append(ops, op)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ops, time.Since(start)
}

// Verify checks a history ending at end and the final state; it returns
// the checker's violations (the planted bug's test wants some). Unless
// planted, the run must have mixed equal, newer and stale tokens.
func Verify(t testing.TB, c Config, ops []nemesis.Op, end time.Duration, final nemesis.State, planted bool) []string {
	t.Helper()
	v := nemesis.CheckRegister(c.Register, ops, end)
	var last nemesis.Op
	n := map[nemesis.Outcome]int{}
	equal := 0
	for _, o := range ops {
		n[o.Outcome]++
		if o.Outcome == nemesis.Accepted {
			if o.Token == o.Prev.Token {
				equal++
			}
			if o.Seq > last.Seq {
				last = o
			}
		}
	}
	if final != (nemesis.State{Token: last.Token, Value: last.Value}) {
		v = append(v, fmt.Sprintf("final state %+v, want the last accepted write %v", final, last))
	}
	if !planted && (equal == 0 || n[nemesis.Accepted] == equal || n[nemesis.Stale] == 0) {
		t.Errorf("the run did not mix equal (%d), newer (%d) and stale (%d) tokens", equal, n[nemesis.Accepted]-equal, n[nemesis.Stale])
	}
	t.Logf("%s: %d writes in %v by %d writers: %d accepted (%d with the stored token), %d stale; %d violations",
		c.Register, len(ops), end.Round(time.Millisecond), c.Workers, n[nemesis.Accepted], equal, n[nemesis.Stale], len(v))
	return v
}

// Check is Verify of a run of a correct fence: each violation is a test
// error.
func Check(t testing.TB, c Config, ops []nemesis.Op, end time.Duration, final nemesis.State) {
	t.Helper()
	for _, v := range Verify(t, c, ops, end, final, false) {
		t.Error(v)
	}
}
