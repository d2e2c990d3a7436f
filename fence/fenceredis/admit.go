package fenceredis

import (
	"context"
	"errors"
	"sync"

	"github.com/zkrecipes/zkrecipes/fence"
)

// ErrNotInAdmit is returned by Stage for a ctx that is not that of an
// Admit's write, or after that write has returned.
var ErrNotInAdmit = errors.New("fenceredis: Stage called outside an Admit's write")

// Stage adds writes to the script of the Admit whose write received ctx:
// they are applied with the token, or not at all (Do checks them).
// Errors: ErrNotInAdmit.
func Stage(ctx context.Context, writes ...Write) error {
	s, _ := ctx.Value(stageKey{}).(*stage)
	if s == nil {
		return ErrNotInAdmit
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrNotInAdmit
	}
	s.writes = append(s.writes, writes...)
	return nil
}

type stageKey struct{}

// stage collects the writes of one Admit.
type stage struct {
	mu     sync.Mutex
	writes []Write
	closed bool // write has returned: no more writes
}

// close ends s and returns its writes.
func (s *stage) close() []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return s.writes
}

// Admit makes a *Fence a fence.Fence (the interface package fencehttp's
// handler takes): it refuses a stale token at once (write is not called),
// then calls write with a ctx through which write adds its Redis writes
// (Stage), then applies them with the token in one script (Do), which
// checks the token again: if it became stale meanwhile, Admit returns a
// *fence.StaleError and none of write's writes lands. write may be nil
// (Admit only records t). What write does other than Stage is not fenced.
// Errors: Do's, and write's own (nothing applied).
func (f *Fence) Admit(ctx context.Context, resource string, t fence.Token, write func(ctx context.Context) error) error {
	if err := checkToken(t); err != nil {
		return err
	}
	high, err := f.Highest(ctx, resource)
	if err != nil {
		return err
	}
	if t < high {
		return &fence.StaleError{Resource: resource, Token: t, Highest: high}
	}
	var writes []Write
	if write != nil {
		s := &stage{}
		err := write(context.WithValue(ctx, stageKey{}, s))
		writes = s.close()
		if err != nil {
			return err
		}
	}
	_, err = f.Do(ctx, resource, t, writes...)
	return err
}
