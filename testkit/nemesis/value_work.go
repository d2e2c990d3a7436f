package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// valueRecorder records a values run, with times since the start of the
// run (the engine recorder's start, so that faults line up).
type valueRecorder struct {
	start time.Time

	mu       sync.Mutex
	ops      []ValueOp
	events   []ValueEvent
	latest   map[int]ValueState // client -> the last state its watches delivered
	latestAt map[int]time.Duration
	writers  sync.WaitGroup // the writers, until they stop at the heal
}

func (r *valueRecorder) now() time.Duration { return time.Since(r.start) }

// get calls v.Get for client (bounded by acquireTimeout) and records it.
func (r *valueRecorder) get(ctx context.Context, client int, v recipe.Value) ValueOp {
	op := ValueOp{Client: client, Kind: ValueGet, Call: r.now()}
	gctx, cancel := context.WithTimeout(ctx, acquireTimeout)
	got, err := v.Get(gctx)
	cancel()
	return r.finish(op, got, err)
}

// set calls v.TrySet for client (bounded by acquireTimeout) and records
// it.
func (r *valueRecorder) set(ctx context.Context, client int, v recipe.Value, expected int64, data string, stale bool) ValueOp {
	op := ValueOp{Client: client, Kind: ValueSet, Expected: expected, Data: data, Stale: stale, Call: r.now()}
	sctx, cancel := context.WithTimeout(ctx, acquireTimeout)
	got, err := v.TrySet(sctx, expected, []byte(data))
	cancel()
	return r.finish(op, got, err)
}

// finish records op, answered by got and err, and returns it.
func (r *valueRecorder) finish(op ValueOp, got recipe.Versioned, err error) ValueOp {
	op.Return = r.now()
	switch {
	case err == nil:
		op.Outcome, op.Got = ValueOK, stateOf(got)
	case op.Kind == ValueSet && errors.Is(err, recipe.ErrConflict):
		op.Outcome, op.Err = ValueConflict, err.Error()
	default:
		op.Outcome, op.Err = ValueUnknown, err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	return op
}

// event records a state client's watch n delivered.
func (r *valueRecorder) event(client, n int, v recipe.Versioned) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := ValueEvent{Client: client, Watch: n, At: r.now(), State: stateOf(v)}
	r.events = append(r.events, e)
	r.latest[client], r.latestAt[client] = e.State, e.At
}

func (r *valueRecorder) snapshot() ([]ValueOp, []ValueEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops), slices.Clone(r.events)
}

// converge waits (checking every 100 ms) until each of the n clients'
// watches last delivered final (any state if !ok), or deadline (since
// the start of the run) has passed; it returns each client's last state
// and when it was delivered (-1 if never).
func (r *valueRecorder) converge(ctx context.Context, n int, final ValueState, ok bool, deadline time.Duration) ([]ValueState, []time.Duration) {
	last, at := make([]ValueState, n), make([]time.Duration, n)
	for {
		all := true
		r.mu.Lock()
		for i := range n {
			s, got := r.latest[i]
			last[i], at[i] = s, -1
			if got {
				at[i] = r.latestAt[i]
			}
			all = all && got && ok && s == final
		}
		r.mu.Unlock()
		if all || r.now() > deadline || ctx.Err() != nil {
			return last, at
		}
		pause(ctx, 100*time.Millisecond)
	}
}

// valueParticipant is one client of a values run: a reader and
// compare-and-setter of the run's value, and a watcher of it, on the
// client's session.
type valueParticipant struct {
	vc    ValueClient
	v     recipe.Value
	w     *workload
	c     *client
	rec   *valueRecorder
	quiet <-chan struct{} // closed at the heal: the writer stops

	seq   int   // the client's writes so far
	known int64 // the version the client last saw (ok Get or TrySet)
	knows bool  // known is from the client's last op (no conflict or error since)
}

// bind ties p to its client, the run's recorder and the value name, once
// connected.
func (p *valueParticipant) bind(w *workload, c *client, rec *valueRecorder, name string, quiet <-chan struct{}) error {
	v, err := p.vc.Value(name)
	if err != nil {
		return fmt.Errorf("nemesis: client %d: %w", c.id, err)
	}
	p.v, p.w, p.c, p.rec, p.quiet = v, w, c, rec, quiet
	rec.writers.Add(1)
	return nil
}

// Run is the Participant's: the watcher on a goroutine of its own, the
// writer until the heal; then it waits for ctx to end.
func (p *valueParticipant) Run(ctx context.Context, rng *rand.Rand, _ func(Held), _ func(time.Time, error)) error {
	if p.rec == nil {
		return fmt.Errorf("%w: the values recipe runs with RunValue, not RunTarget", ErrBadConfig)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.watch(ctx)
	}()
	p.write(ctx, rng)
	p.rec.writers.Done()
	<-ctx.Done()
	wg.Wait()
	return nil
}

// watch records every state the value's Watch delivers until ctx ends,
// watching again when a channel closes before that.
func (p *valueParticipant) watch(ctx context.Context) {
	for n := 0; ctx.Err() == nil; n++ {
		for v := range p.v.Watch(ctx) {
			p.rec.event(p.c.id, n, v)
		}
		pause(ctx, 50*time.Millisecond)
	}
}

// write runs the writer every 5 to 40 ms until the heal (or ctx ends),
// stalled by a pause-client fault like a holder: a quarter of the time a
// Get alone; else a Get and a TrySet with the version read (always when
// the client does not know the version), a TrySet with the version it last
// knew (stale if another wrote since), or one with a version it knows to
// be wrong (below or above the one it knows), on purpose.
func (p *valueParticipant) write(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		select {
		case <-p.quiet:
			return
		default:
		}
		pause(ctx, 5*time.Millisecond+time.Duration(rng.IntN(35))*time.Millisecond)
		p.w.freeze(p.c)
		if ctx.Err() != nil {
			return
		}
		switch x := rng.IntN(20); {
		case x < 5:
			p.get(ctx)
		case !p.knows || x < 14:
			if p.get(ctx) {
				p.set(ctx, p.known, false)
			}
		case x < 17:
			p.set(ctx, p.known, false)
		default:
			wrong := p.known - 1 - int64(rng.IntN(2))
			if wrong < 0 || rng.IntN(3) == 0 {
				wrong = p.known + 1 + int64(rng.IntN(2))
			}
			p.set(ctx, wrong, true)
		}
	}
}

// get reads the value and reports whether the client now knows its
// version.
func (p *valueParticipant) get(ctx context.Context) bool {
	op := p.rec.get(ctx, p.c.id, p.v)
	p.knows = op.Outcome == ValueOK
	if p.knows {
		p.known = op.Got.Version
	}
	return p.knows
}

// set writes the client's next data, unique in the run, expecting
// version expected.
func (p *valueParticipant) set(ctx context.Context, expected int64, stale bool) {
	p.seq++
	op := p.rec.set(ctx, p.c.id, p.v, expected, fmt.Sprintf("c%d-%d", p.c.id, p.seq), stale)
	p.knows = op.Outcome == ValueOK
	if p.knows {
		p.known = op.Got.Version
	}
}
