// Package fencebatch is the batch a fence's Admit hands its write: the
// write adds items (etcd ops, Redis writes) through the ctx it got, and
// Admit applies them with its token in one atomic step after the write
// returns, or not at all. Adding after the write returned is refused, so
// a ctx kept past its Admit cannot slip items into nothing.
package fencebatch

import (
	"context"
	"fmt"
	"sync"

	"github.com/zkrecipes/zkrecipes/fence"
)

// key is the context key of a batch of T: one per item type, so batches
// of different backends never see each other.
type key[T any] struct{}

// batch collects the items of one write.
type batch[T any] struct {
	check  func(T) error
	mu     sync.Mutex
	items  []T
	closed bool // write has returned: no more items
}

// Collect calls write once with a ctx that carries a new batch, closes
// the batch when write returns, and returns the items added (through
// [Add]) and write's error as it returned it. check, if not nil, vets
// each item as it is added.
func Collect[T any](ctx context.Context, check func(T) error, write func(context.Context) error) ([]T, error) {
	b := &batch[T]{check: check}
	err := write(context.WithValue(ctx, key[T]{}, b))
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return b.items, err
}

// Add adds items to the batch ctx carries. It reports false (nothing
// added) when ctx carries no batch of T or its write has returned; an
// item check refuses comes back as "op <i>: <check's error>" and nothing
// is added.
func Add[T any](ctx context.Context, items ...T) (bool, error) {
	b, _ := ctx.Value(key[T]{}).(*batch[T])
	if b == nil {
		return false, nil
	}
	if b.check != nil {
		for i, it := range items {
			if err := b.check(it); err != nil {
				return false, fmt.Errorf("op %d: %w", i, err)
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false, nil
	}
	b.items = append(b.items, items...)
	return true, nil
}

// Admit is the body of a fence's Admit whose write adds items of T (the
// caller has checked t). It reads resource's highest token and refuses a
// lower t at once with a *fence.StaleError (write is not called);
// otherwise it calls write, once, through [Collect] (check vets each item
// added) and hands the items to apply, which applies them with t in one
// atomic step that compares again. write may be nil (apply gets no items).
// write's error comes back as it returned it, and nothing is applied.
// The fence's own refusals (not write's) are reported to onStale.
func Admit[T any](ctx context.Context, resource string, t fence.Token,
	highest func(ctx context.Context, resource string) (fence.Token, error),
	check func(T) error, write func(context.Context) error,
	apply func(ctx context.Context, items []T) error, onStale func(*fence.StaleError)) error {
	high, err := highest(ctx, resource)
	if err != nil {
		return err
	}
	if t < high {
		return fence.Reported(&fence.StaleError{Resource: resource, Token: t, Highest: high}, nil, onStale)
	}
	var items []T
	if write != nil {
		if items, err = Collect(ctx, check, write); err != nil {
			return err // write's, not a refusal of this fence
		}
	}
	return fence.Reported(apply(ctx, items), nil, onStale)
}
