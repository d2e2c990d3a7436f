// Package lazy holds the one shared server of a test harness (pgtest,
// etcdtest, redistest): launched on first use, its launch error remembered
// so that later callers fail the same way at once (no slow relaunch per
// test), and stopped at the end of the test binary.
package lazy

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// Shared is one lazily launched value of type T; its zero value is empty
// and ready to use. All methods are safe for concurrent use.
type Shared[T interface{ Close() error }] struct {
	mu       sync.Mutex
	v        T
	err      error
	launched bool // launch ran (v or err is set) since the last Stop
}

// Load returns the value, calling launch on the first call (or the first
// after Stop). A failed launch is not retried: later calls get its error.
func (s *Shared[T]) Load(launch func() (T, error)) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.launched {
		s.v, s.err = launch()
		s.launched = true
	}
	return s.v, s.err
}

// Get is Load for a test: when no value can be had it fails tb at once
// with "name: error".
func (s *Shared[T]) Get(tb testing.TB, name string, launch func() (T, error)) T {
	tb.Helper()
	v, err := s.Load(launch)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return v
}

// Stop closes the value, if one was launched, after running before on it
// (nil: nothing), both under the lock; it forgets the value and any launch
// error, so that a later Load launches anew. It returns Close's error.
func (s *Shared[T]) Stop(before func(T)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.launched && s.err == nil {
		if before != nil {
			before(s.v)
		}
		err = s.v.Close()
	}
	var zero T
	s.v, s.err, s.launched = zero, nil, false
	return err
}

// StopOrWarn is Stop for a harness's StopShared, which has no test to fail:
// a Close error is written to standard error as "what: error".
func (s *Shared[T]) StopOrWarn(before func(T), what string) {
	if err := s.Stop(before); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	}
}
