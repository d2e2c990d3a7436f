package fenceetcd

import (
	"context"
	"errors"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/fence"
)

// ErrNotInAdmit is returned by Stage for a ctx that is not that of an
// Admit's write, or after that write has returned.
var ErrNotInAdmit = errors.New("fenceetcd: Stage called outside an Admit's write")

// Stage adds ops to the transaction of the Admit whose write received ctx:
// they are applied with the token, or not at all. Each is checked as Do
// checks it. Errors: ErrBadOp (nothing staged), ErrNotInAdmit.
func Stage(ctx context.Context, ops ...clientv3.Op) error {
	s, _ := ctx.Value(stageKey{}).(*stage)
	if s == nil {
		return ErrNotInAdmit
	}
	for i, op := range ops {
		if err := s.f.checkOp(op); err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrNotInAdmit
	}
	s.ops = append(s.ops, ops...)
	return nil
}

type stageKey struct{}

// stage collects the ops of one Admit.
type stage struct {
	f      *Fence
	mu     sync.Mutex
	ops    []clientv3.Op
	closed bool // write has returned: no more ops
}

// close ends s and returns its ops.
func (s *stage) close() []clientv3.Op {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return s.ops
}

// Admit makes a *Fence a fence.Fence (the interface package fencehttp's
// handler takes): it refuses a stale token at once (write is not called),
// then calls write with a ctx through which write adds its etcd
// operations (Stage), then applies them with the token in one transaction
// (Do), which checks the token again: if it became stale meanwhile, Admit
// returns a *fence.StaleError and none of write's operations lands. write
// may be nil (Admit only records t). What write does other than Stage is
// not fenced. Errors: Do's, and write's own (nothing applied).
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
	s := &stage{f: f}
	if write != nil {
		err := write(context.WithValue(ctx, stageKey{}, s))
		ops := s.close()
		if err != nil {
			return err
		}
		_, err = f.Do(ctx, resource, t, ops...)
		return err
	}
	_, err = f.Do(ctx, resource, t)
	return err
}
