package zkwire

import (
	"fmt"
	"slices"
)

// Keys returns the registrations w mirrors, as "data /p", "exist /p" and
// "child /p", sorted.
func (w *Watches) Keys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var keys []string
	for k := range w.set {
		keys = append(keys, fmt.Sprintf("%s %s", [...]string{watchData: "data", watchExist: "exist", watchChild: "child"}[k.kind], k.path))
	}
	slices.Sort(keys)
	return keys
}
