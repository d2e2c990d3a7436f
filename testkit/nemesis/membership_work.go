package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// memberRecorder records a membership run: the members' registrations (from
// Member.Listen), their calls and the watchers' views, with times since
// the start of the run (the engine recorder's start, so that faults line
// up).
type memberRecorder struct {
	start time.Time

	mu       sync.Mutex
	spans    []*MemberSpan
	open     map[[2]int]*MemberSpan // (client, member) -> its live registration
	lastEnd  map[[2]int]time.Duration
	calls    []MemberCall
	views    []ViewRec
	latest   map[int]ViewRec // watcher -> its latest view
	joined   map[string]bool // ids whose client holds a Member (joined, not leaving)
	stopped  bool
	listens  sync.WaitGroup
	unlisten []context.CancelFunc
}

func (r *memberRecorder) now() time.Duration { return time.Since(r.start) }

func (r *memberRecorder) since(t time.Time) time.Duration { return t.Sub(r.start) }

// call records a Join, Update or Leave.
func (r *memberRecorder) call(c MemberCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// viewRec converts v, delivered now to watcher w (watch number n).
func (r *memberRecorder) viewRec(w, n int, v recipe.View) ViewRec {
	vr := ViewRec{Watcher: w, Watch: n, At: r.now(), Rev: v.Rev, Members: []ViewMember{}}
	for _, m := range v.Members {
		vr.Members = append(vr.Members, ViewMember{ID: m.ID, Since: m.Since, Data: string(m.Data)})
	}
	return vr
}

// view records a view a watcher delivered (none once stopped).
func (r *memberRecorder) view(vr ViewRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.views = append(r.views, vr)
	if r.latest == nil {
		r.latest = map[int]ViewRec{}
	}
	r.latest[vr.Watcher] = vr
}

// setJoined records whether id's client holds a Member.
func (r *memberRecorder) setJoined(id string, joined bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.joined == nil {
		r.joined = map[string]bool{}
	}
	r.joined[id] = joined
}

// allShow reports whether final shows every member joined, and each of
// the n watchers' latest view shows the members of final.
func (r *memberRecorder) allShow(n int, final ViewRec) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, j := range r.joined {
		if j && !slices.ContainsFunc(final.Members, func(m ViewMember) bool { return m.ID == id }) {
			return false
		}
	}
	for i := range n {
		v, ok := r.latest[i]
		if !ok || !sameMembers(v.Members, final.Members) {
			return false
		}
	}
	return true
}

// stop ends the recording of views and returns when.
func (r *memberRecorder) stop() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	return r.now()
}

// listen records member m's registrations (client c, its Join number k,
// joined by a call made at asked) until its Listen channel closes, which
// it does at Leave or the member's end (the client's Close), or at
// endListeners.
func (r *memberRecorder) listen(c, k int, m recipe.Member, asked time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := m.Listen(ctx)
	r.mu.Lock()
	r.unlisten = append(r.unlisten, cancel)
	r.mu.Unlock()
	r.listens.Add(1)
	go func() {
		defer r.listens.Done()
		defer cancel()
		key := [2]int{c, k}
		for reg := range ch {
			r.registration(key, m.ID(), reg, asked)
		}
	}()
}

// registration records one Registration of member key.
func (r *memberRecorder) registration(key [2]int, id string, reg recipe.Registration, asked time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at := r.since(reg.At)
	if s := r.open[key]; s != nil && (!reg.Registered || s.Since != reg.Since) {
		s.End = at
		if reg.Cause != nil {
			s.Cause = reg.Cause.Error()
		}
		delete(r.open, key)
		if r.lastEnd == nil {
			r.lastEnd = map[[2]int]time.Duration{}
		}
		r.lastEnd[key] = at
	}
	if !reg.Registered || r.open[key] != nil {
		return
	}
	if e, ok := r.lastEnd[key]; ok {
		asked = e
	}
	s := &MemberSpan{Client: key[0], ID: id, Member: key[1], Since: reg.Since, Asked: asked, Start: at, End: -1}
	r.spans = append(r.spans, s)
	r.open[key] = s
}

// endListeners, once every client closed, stops the listeners still
// running (a member whose end was never delivered) and waits for them.
func (r *memberRecorder) endListeners() {
	time.Sleep(50 * time.Millisecond)
	r.mu.Lock()
	cancels := r.unlisten
	r.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	r.listens.Wait()
}

func (r *memberRecorder) snapshot() ([]MemberSpan, []MemberCall, []ViewRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	spans := make([]MemberSpan, len(r.spans))
	for i, s := range r.spans {
		spans[i] = *s
	}
	return spans, append([]MemberCall(nil), r.calls...), append([]ViewRec(nil), r.views...)
}

// memberParticipant is one client of a membership run: member "c<i>" and a
// watcher on the client's session.
type memberParticipant struct {
	g     recipe.Group
	w     *workload
	c     *client
	rec   *memberRecorder
	quiet <-chan struct{} // closed at the heal: the member stops changing

	id    string
	seq   int // the client's values so far
	joins int // Joins that returned a Member
}

// bind ties p to its client and the run's recorder, once connected.
func (p *memberParticipant) bind(w *workload, c *client, rec *memberRecorder, quiet <-chan struct{}) {
	p.w, p.c, p.rec, p.quiet, p.id = w, c, rec, quiet, fmt.Sprintf("c%d", c.id)
}

// Run is the Participant's: the watcher on a goroutine of its own, and the
// member's life until ctx ends, when it leaves (half the time; the other
// half its client's Close ends it).
func (p *memberParticipant) Run(ctx context.Context, rng *rand.Rand, _ func(Held), _ func(time.Time, error)) error {
	if p.rec == nil {
		return fmt.Errorf("%w: the members recipe runs with RunMembership, not RunTarget", ErrBadConfig)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.watch(ctx)
	}()
	m := p.live(ctx, rng)
	if m != nil && rng.IntN(2) == 0 {
		p.leave(m)
	}
	wg.Wait()
	return context.Cause(ctx)
}

// watch records every View of the group until ctx ends, watching again
// when a channel closes before that.
func (p *memberParticipant) watch(ctx context.Context) {
	for n := 0; ctx.Err() == nil; n++ {
		for v := range p.g.Watch(ctx) {
			p.rec.view(p.rec.viewRec(p.c.id, n, v))
		}
		pause(ctx, 50*time.Millisecond)
	}
}

// live is the member's life until ctx ends: join (again after each
// leave), then every 50 to 400 ms update its data (7 times in 10) or leave
// and join again; after the heal, only join. It returns the Member joined
// when ctx ended (nil if none).
func (p *memberParticipant) live(ctx context.Context, rng *rand.Rand) recipe.Member {
	var m recipe.Member
	for ctx.Err() == nil {
		if m == nil {
			m = p.join(ctx)
			if m == nil {
				pause(ctx, 20*time.Millisecond+time.Duration(rng.IntN(80))*time.Millisecond)
			}
			continue
		}
		select {
		case <-p.quiet:
			<-ctx.Done()
			continue
		default:
		}
		pause(ctx, 50*time.Millisecond+time.Duration(rng.IntN(350))*time.Millisecond)
		p.w.freeze(p.c)
		if ctx.Err() != nil {
			break
		}
		if rng.IntN(10) < 7 {
			p.update(ctx, m)
			continue
		}
		p.leave(m)
		m = nil
	}
	return m
}

// value returns the client's next data value.
func (p *memberParticipant) value() (string, int) {
	p.seq++
	return fmt.Sprintf("%s.%d", p.id, p.seq), p.seq
}

// join calls Join once (with a fresh value, bounded by acquireTimeout),
// records it, and listens to the Member it returns.
func (p *memberParticipant) join(ctx context.Context) recipe.Member {
	val, seq := p.value()
	call := p.rec.now()
	jctx, cancel := context.WithTimeout(ctx, acquireTimeout)
	m, err := p.g.Join(jctx, p.id, []byte(val))
	cancel()
	c := MemberCall{Client: p.c.id, ID: p.id, Member: p.joins, Kind: CallJoin, Value: val, Seq: seq, Call: call, Return: p.rec.now()}
	if err != nil {
		c.Err = err.Error()
		p.rec.call(c)
		return nil
	}
	p.rec.call(c)
	p.rec.setJoined(p.id, true)
	p.rec.listen(p.c.id, p.joins, m, call)
	p.joins++
	return m
}

// update writes a fresh value (bounded by acquireTimeout).
func (p *memberParticipant) update(ctx context.Context, m recipe.Member) {
	val, seq := p.value()
	call := p.rec.now()
	uctx, cancel := context.WithTimeout(ctx, acquireTimeout)
	err := m.Update(uctx, []byte(val))
	cancel()
	c := MemberCall{Client: p.c.id, ID: p.id, Member: p.joins - 1, Kind: CallUpdate, Value: val, Seq: seq, Call: call, Return: p.rec.now()}
	if err != nil {
		c.Err = err.Error()
	}
	p.rec.call(c)
}

// leave calls Leave (bounded by 5 s, as a holder's Release).
func (p *memberParticipant) leave(m recipe.Member) {
	p.rec.setJoined(p.id, false)
	call := p.rec.now()
	lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := m.Leave(lctx)
	cancel()
	c := MemberCall{Client: p.c.id, ID: p.id, Member: p.joins - 1, Kind: CallLeave, Call: call, Return: p.rec.now()}
	if err != nil {
		c.Err = err.Error()
	}
	p.rec.call(c)
}
