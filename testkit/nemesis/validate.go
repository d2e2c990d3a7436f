package nemesis

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// validate checks what the page and the checker rely on, so that a
// history that contradicts itself is refused rather than drawn: a recipe,
// at least one client, clients and grants that exist; no negative time
// (a lease can end after End: its end is recorded as the clients close);
// every interval in order (asked, granted, ended; call, return; a fault's
// start and end; the heal within the run); an op of a grant made by that
// grant's client with its token, not before it was granted; and the first
// grant after the heal that the grants show (the recovery is read from it);
// one grant op per grant (the sample taken at it); a Backend this package
// knows ("" is a history of format /1 or of a test), whose fault kinds
// alone the faults may be.
func (h *History) validate() error {
	if h.Recipe == "" || h.Clients < 1 || h.End <= 0 {
		return fmt.Errorf("recipe %q, %d clients, end %v: not a recorded run", h.Recipe, h.Clients, h.End)
	}
	if h.Healed < 0 || h.Healed > h.End {
		return fmt.Errorf("healed at %v, outside the run (0 to %v)", h.Healed, h.End)
	}
	if err := h.validateBackend(); err != nil {
		return err
	}
	grants, err := h.validateGrants()
	if err != nil {
		return err
	}
	if err := h.validateOps(grants); err != nil {
		return err
	}
	if err := h.validateGrantOps(); err != nil {
		return err
	}
	return h.validateFaults()
}

// validateGrantOps checks that every grant has exactly one grant op (the
// sample the recorder takes at each grant): a history whose ops were cut
// out would otherwise check as a pass with nothing to check.
func (h *History) validateGrantOps() error {
	n := make(map[int]int, len(h.Grants))
	for _, o := range h.Ops {
		if o.Kind == OpGrant {
			n[o.Grant]++
		}
	}
	missing, first := 0, -1
	for _, g := range h.Grants {
		switch n[g.ID] {
		case 1:
		case 0:
			if missing++; first < 0 {
				first = g.ID
			}
		default:
			return fmt.Errorf("grant %d has %d grant ops (one is recorded at each grant)", g.ID, n[g.ID])
		}
	}
	if missing > 0 {
		return fmt.Errorf("%d of %d grants have no grant op (the first: grant %d); a grant op is recorded at each grant", missing, len(h.Grants), first)
	}
	return nil
}

// validateBackend checks that h's Backend is one this package knows and
// that each fault is of a kind it has ("" is not checked: a history of
// format /1, ZooKeeper's, or one a test made).
func (h *History) validateBackend() error {
	if h.Backend == "" {
		return nil
	}
	kinds, ok := BackendFaults(h.Backend)
	if !ok {
		return fmt.Errorf("backend %q is not one this version knows (%s)", h.Backend, strings.Join(Backends(), ", "))
	}
	for i, f := range h.Faults {
		if !slices.Contains(kinds, f.Kind) {
			return fmt.Errorf("fault %d (%s): backend %s has no such fault kind (it has: %s)", i, f.Kind, h.Backend, strings.Join(kinds, ", "))
		}
	}
	return nil
}

// validateGrants checks each grant (its client, its times in order, an ID
// of its own) and the first grant after the heal, and returns the grants
// by ID.
func (h *History) validateGrants() (map[int]*Grant, error) {
	grants := make(map[int]*Grant, len(h.Grants))
	first := time.Duration(-1) // the first grant at or after the heal
	for i := range h.Grants {
		g := &h.Grants[i]
		what := fmt.Sprintf("grant %d", g.ID)
		names, ts := []string{"asked", "granted", "ended"}, []time.Duration{g.Asked, g.Granted, g.Ended}
		if g.Ended == -1 { // still live when the run ended
			names, ts = names[:2], ts[:2]
		}
		if err := errors.Join(h.checkClient(what, g.Client), inOrder(what, names, ts...)); err != nil {
			return nil, err
		}
		if grants[g.ID] != nil {
			return nil, fmt.Errorf("two grants with ID %d", g.ID)
		}
		grants[g.ID] = g
		if g.Granted >= h.Healed && (first < 0 || g.Granted < first) {
			first = g.Granted
		}
	}
	if h.FirstGrantAfterHeal != first {
		at := func(t time.Duration) string {
			if t == -1 {
				return "none"
			}
			return t.String()
		}
		return nil, fmt.Errorf("first grant after the heal at %v recorded as %s, but the grants show %s", h.Healed, at(h.FirstGrantAfterHeal), at(first))
	}
	return grants, nil
}

// validateOps checks each op: its client, its call before its return, its
// grant (Op.validate) and the grants it samples.
func (h *History) validateOps(grants map[int]*Grant) error {
	for i, o := range h.Ops {
		what := fmt.Sprintf("op %d (%s)", i, o.Kind)
		if err := errors.Join(h.checkClient(what, o.Client), inOrder(what, []string{"call", "return"}, o.Call, o.Return)); err != nil {
			return err
		}
		if err := o.validate(what, grants); err != nil {
			return err
		}
		for _, id := range o.Live {
			if grants[id] == nil {
				return fmt.Errorf("%s samples grant %d, which is not in the history", what, id)
			}
		}
	}
	return nil
}

// validateFaults checks each fault's client (-1 for none) and its start
// before its end.
func (h *History) validateFaults() error {
	for i, f := range h.Faults {
		what := fmt.Sprintf("fault %d (%s)", i, f.Kind)
		if f.Client != -1 {
			if err := h.checkClient(what, f.Client); err != nil {
				return err
			}
		}
		if err := inOrder(what, []string{"start", "end"}, f.Start, f.End); err != nil {
			return err
		}
	}
	return nil
}

// checkClient reports (as part of what) a client c that h does not have.
func (h *History) checkClient(what string, c int) error {
	if c < 0 || c >= h.Clients {
		return fmt.Errorf("%s names client %d of %d", what, c, h.Clients)
	}
	return nil
}

// inOrder checks that ts (named names, as part of what) are not negative
// and in order.
func inOrder(what string, names []string, ts ...time.Duration) error {
	for i, t := range ts {
		if t < 0 {
			return fmt.Errorf("%s: %s at %v, before the run began", what, names[i], t)
		}
		if i > 0 && t < ts[i-1] {
			return fmt.Errorf("%s: %s at %v, before %s at %v", what, names[i], t, names[i-1], ts[i-1])
		}
	}
	return nil
}

// validate checks o's kind, outcome and grant against the grants of its
// history.
func (o Op) validate(what string, grants map[int]*Grant) error {
	switch o.Kind {
	case OpAcquire:
		if o.Grant != -1 {
			return fmt.Errorf("%s names grant %d (a failed attempt has none: -1)", what, o.Grant)
		}
		return nil
	case OpGrant, OpProbe:
	case OpWrite:
		switch o.Outcome {
		case Accepted, Stale, Unknown, Failed:
		default:
			return fmt.Errorf("%s: outcome %q", what, o.Outcome)
		}
		if o.Register == "" {
			return fmt.Errorf("%s: no register", what)
		}
	default:
		return fmt.Errorf("%s: unknown kind", what)
	}
	g := grants[o.Grant]
	switch {
	case g == nil:
		return fmt.Errorf("%s names grant %d, which is not in the history", what, o.Grant)
	case g.Client != o.Client || g.Token != o.Token:
		return fmt.Errorf("%s of client %d with token %s names grant %d, client %d's with token %s", what, o.Client, TokenText(o.Token), g.ID, g.Client, TokenText(g.Token))
	case o.Call < g.Granted:
		return fmt.Errorf("%s at %v, before its grant %d was made at %v", what, o.Call, g.ID, g.Granted)
	}
	return nil
}
