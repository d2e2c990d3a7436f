// Package holding counts a process's live grants per lock for the metrics
// exporters (recipe.HoldingMetrics), written once for prommetrics and
// otelmetrics.
package holding

import (
	"sync"

	"github.com/zkrecipes/zkrecipes/fence"
)

// Set is the live grants of one exporter by kind and path. The zero value
// is ready; safe for concurrent use.
type Set struct {
	mu   sync.Mutex
	live map[[2]string]map[fence.Token]int
}

// Add applies one Holding call (delta +1 or -1 for token) and calls report
// with the grants of kind and path live now and the largest of their
// tokens (zero when none), under the Set's lock so that the exporter's
// gauges are set in the order of the calls. A -1 without its +1 is ignored.
func (s *Set) Add(kind, path string, token fence.Token, delta int, report func(n int, largest fence.Token)) {
	var n int
	var largest fence.Token
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		s.live = map[[2]string]map[fence.Token]int{}
	}
	k := [2]string{kind, path}
	m := s.live[k]
	if m == nil {
		m = map[fence.Token]int{}
		s.live[k] = m
	}
	if c := m[token] + delta; c > 0 {
		m[token] = c
	} else {
		delete(m, token)
	}
	for t, c := range m {
		n += c
		largest = max(largest, t)
	}
	if len(m) == 0 {
		delete(s.live, k)
	}
	report(n, largest)
}
