// Package member is the one registration loop of group membership, for
// every backend: register, publish, wait for the registration's end, publish
// that, register again with backoff, until Leave or an error retrying
// cannot cure. A backend supplies a Registrar; this package makes it a
// recipe.Member.
package member

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/internal/notify"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Backoff between failed registrations (a standing loop's, as the latch's).
const (
	backoffInitial = 50 * time.Millisecond
	backoffMax     = 2 * time.Second
)

// Registrar is a backend's side of one member.
type Registrar interface {
	// Register makes the registration exist carrying data, or takes back the
	// one that still exists (a ZooKeeper node kept through a suspension),
	// and returns it as a lease: Token is its creation revision, Context
	// ends when it is in doubt or lost, Release removes it. An error leaves
	// nothing behind; recipe.ErrMemberExists while another registration
	// holds the id.
	Register(ctx context.Context, data []byte) (recipe.Lease, error)
	// Update writes data on the live registration l, checked against what
	// this member last wrote (recipe.ErrConflict), a lost reply settled.
	Update(ctx context.Context, l recipe.Lease, data []byte) error
	// Remove deletes whatever of the registration is left once the last
	// lease was released (a node kept for a re-grant), ignoring ctx's end
	// within the backend's cleanup bound.
	Remove(ctx context.Context) error
}

// Member is a recipe.Member over a Registrar.
type Member struct {
	id  string
	r   Registrar
	log *slog.Logger

	ctx    context.Context // ends at Leave
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the loop is over

	wmu  chan struct{} // a one-slot lock: serializes Register and Update, taken with a ctx
	data []byte        // under wmu: what the next registration carries

	mu        sync.Mutex
	cur       recipe.Lease         // the live registration, or nil
	end       error                // why the member ended for good
	final     *recipe.Registration // the final Registration, once delivered
	changed   notify.Broadcast
	listeners notify.Listeners[recipe.Registration]
}

var _ recipe.Member = (*Member)(nil)

// Join makes the first registration (its error is Join's, nothing left
// behind) and starts the loop that keeps it. log names the member in its
// warnings.
func Join(ctx context.Context, id string, data []byte, r Registrar, log *slog.Logger) (*Member, error) {
	data = bytes.Clone(data)
	m := &Member{id: id, r: r, log: log.With("member", id), data: data, done: make(chan struct{}), wmu: make(chan struct{}, 1)}
	l, err := r.Register(ctx, data)
	if err != nil {
		return nil, err
	}
	m.ctx, m.cancel = context.WithCancelCause(context.Background())
	m.publish(l)
	go m.run(l)
	return m, nil
}

// ID returns the member's id.
func (m *Member) ID() string { return m.id }

// run keeps the registration until Leave or the member's end.
func (m *Member) run(l recipe.Lease) {
	defer close(m.done)
	b := loop.BackOff(backoffInitial, backoffMax)
	stop := loop.Stopper{Confirm: recipe.ErrMixedRecipes}
	for {
		select {
		case <-l.Context().Done():
		case <-m.ctx.Done():
			return // Leave releases l
		}
		cause := context.Cause(l.Context())
		m.lost(l, cause)
		if errors.Is(cause, recipe.ErrSessionClosed) {
			m.stop(cause)
			return
		}
		b.Reset()
		for {
			nl, err := m.register(m.ctx)
			if m.ctx.Err() != nil {
				if err == nil {
					m.setCur(nl) // Leave releases it
				}
				return
			}
			if err == nil {
				l = nl
				break
			}
			if stop.Stop(err, recipe.Permanent(err)) {
				if !errors.Is(err, recipe.ErrSessionClosed) {
					m.log.Error("member: stopped: retrying cannot help", "err", err)
				}
				m.stop(err)
				return
			}
			m.log.Warn("member: registering again failed; retrying", "err", err)
			if loop.Pause(m.ctx, b, backoffMax) != nil {
				return
			}
		}
		m.publish(l)
	}
}

// register makes the next registration with the current data.
func (m *Member) register(ctx context.Context) (recipe.Lease, error) {
	if err := m.lockW(ctx); err != nil {
		return nil, err
	}
	defer m.unlockW()
	return m.r.Register(ctx, m.data)
}

// lockW takes wmu, or returns ctx's cause.
func (m *Member) lockW(ctx context.Context) error {
	select {
	case m.wmu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (m *Member) unlockW() { <-m.wmu }

// setCur records l as the member's registration without telling anyone.
func (m *Member) setCur(l recipe.Lease) {
	m.mu.Lock()
	m.cur = l
	m.mu.Unlock()
}

// publish makes l the live registration and tells listeners.
func (m *Member) publish(l recipe.Lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cur = l
	m.listeners.Push(recipe.Registration{Registered: true, Since: int64(l.Token()), At: time.Now()})
	m.changed.Notify()
}

// lost tells listeners that registration l ended with cause.
func (m *Member) lost(l recipe.Lease, cause error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.end != nil {
		return
	}
	m.listeners.Push(recipe.Registration{Since: int64(l.Token()), At: time.Now(), Cause: cause})
	m.changed.Notify()
}

// stop ends the member for good with err.
func (m *Member) stop(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.end == nil {
		m.end = err
	}
	m.finishLocked()
}

// finishLocked delivers the final Registration once and closes listeners.
func (m *Member) finishLocked() {
	if m.listeners.Finished() {
		return
	}
	var since int64
	if m.cur != nil {
		since = int64(m.cur.Token())
	}
	m.final = &recipe.Registration{Since: since, At: time.Now(), Cause: m.end}
	m.listeners.Finish(*m.final)
	m.changed.Notify()
}

// live returns the live registration, waiting for one.
func (m *Member) live(ctx context.Context) (recipe.Lease, error) {
	for {
		m.mu.Lock()
		if m.end != nil {
			err := m.end
			m.mu.Unlock()
			return nil, err
		}
		if l := m.cur; l != nil && l.Context().Err() == nil {
			m.mu.Unlock()
			return l, nil
		}
		ch := m.changed.C()
		m.mu.Unlock()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// Registered is recipe.Member's.
func (m *Member) Registered(ctx context.Context) (context.Context, error) {
	l, err := m.live(ctx)
	if err != nil {
		return nil, err
	}
	return l.Context(), nil
}

// Update is recipe.Member's. Registrations made after it carry data only
// once it returned nil: after an error whose outcome is unknown they carry
// the data of the last Update that returned nil.
func (m *Member) Update(ctx context.Context, data []byte) error {
	data = bytes.Clone(data)
	for {
		l, err := m.live(ctx)
		if err != nil {
			return err
		}
		if err := m.lockW(ctx); err != nil {
			return err
		}
		if l.Context().Err() != nil {
			m.unlockW()
			continue // ended meanwhile: wait for the next one
		}
		err = m.r.Update(ctx, l, data)
		if err == nil {
			m.data = data
		}
		m.unlockW()
		return err
	}
}

// Listen is recipe.Member's.
func (m *Member) Listen(ctx context.Context) <-chan recipe.Registration {
	if ctx == nil {
		ctx = context.Background()
	}
	f := notify.NewFeed[recipe.Registration]()
	m.mu.Lock()
	if !m.listeners.Add(f) {
		// Ended: the final Registration, then the channel closes.
		if m.final != nil {
			f.Finish(*m.final)
		} else {
			f.Finish(recipe.Registration{At: time.Now(), Cause: m.end})
		}
		m.mu.Unlock()
		go f.Run(ctx, nil)
		return f.C()
	}
	if l := m.cur; l != nil && l.Context().Err() == nil {
		f.Push(recipe.Registration{Registered: true, Since: int64(l.Token()), At: time.Now()})
	}
	m.mu.Unlock()
	go func() {
		defer func() {
			m.mu.Lock()
			m.listeners.Remove(f)
			m.mu.Unlock()
		}()
		f.Run(ctx, nil)
	}()
	return f.C()
}

// Leave is recipe.Member's: it stops the loop, releases the registration
// and removes what is left of it.
func (m *Member) Leave(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	m.cancel(recipe.ErrLeft)
	<-m.done // the loop never blocks on anything but m.ctx and requests bounded by it
	m.mu.Lock()
	if m.end == nil {
		m.end = recipe.ErrLeft
	}
	l := m.cur
	m.mu.Unlock()
	var err error
	if l != nil {
		if rerr := l.Release(ctx); rerr != nil && !errors.Is(rerr, recipe.ErrLeaseLost) {
			err = rerr
		}
	}
	if rerr := m.r.Remove(ctx); rerr != nil && err == nil {
		err = rerr
	}
	m.mu.Lock()
	m.finishLocked()
	m.mu.Unlock()
	return err
}
