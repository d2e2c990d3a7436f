package nemesis

import (
	"strings"
	"testing"
	"time"
)

// lostThenGranted is a history in which grant 0 (client 0) is lost at
// 300 ms and grant 1 (client 1) is granted at granted.
func lostThenGranted(granted time.Duration) *History {
	h := base()
	h.Grants = []Grant{
		{ID: 0, Client: 0, Role: RoleHolder, Token: 10, Granted: 10 * ms, Ended: 300 * ms, Lost: true, Cause: "recipe: connection suspended"},
		{ID: 1, Client: 1, Role: RoleHolder, Token: 20, Asked: 5 * ms, Granted: granted, Ended: 990 * ms, Cause: released},
		{ID: 2, Client: 0, Role: RoleHolder, Token: 30, Asked: 400 * ms, Granted: 995 * ms, Ended: 999 * ms, Lost: true, Cause: "x"},
	}
	h.Ops, h.Healed, h.FirstGrantAfterHeal = nil, 900*ms, 995*ms
	return h
}

// TestMargins: a lost lease's margin is the next grant to another client
// minus its end; a negative one is a violation unless a revocation of its
// holder's lease excuses it (and leaves it out of the figures, whatever
// its sign); a revocation of another client's does not.
func TestMargins(t *testing.T) {
	h := lostThenGranted(800 * ms)
	r := Check(h, AtMost(1))
	if m := r.Margins; m.Count != 1 || m.Min != 500*ms || m.Median != 500*ms || m.Max != 500*ms || len(r.Violations) > 0 {
		t.Errorf("margins %s, violations %q", m, r.Violations)
	}
	if !strings.Contains(r.Summary(), "margins 1 measured: min 500ms") {
		t.Errorf("summary %q", r.Summary())
	}

	h = lostThenGranted(200 * ms) // granted 100 ms before the holder knew
	at := expect(t, h, AtMost(1), "negative margin -100ms")
	expectAt(t, at, Span{200 * ms, 300 * ms})

	h.Faults = []Fault{{Kind: "client-kill", Client: 1, Start: 150 * ms, End: 160 * ms, Revokes: true, Certain: true}}
	expect(t, h, AtMost(1), "negative margin") // client 1's revocation does not excuse client 0's lease
	h.Faults[0].Client = 0
	r = Check(h, AtMost(1))
	if len(r.Violations) > 0 || r.Margins.Count != 0 || r.Margins.Excused != 1 {
		t.Errorf("excused: margins %s, violations %q", r.Margins, r.Violations)
	}
	h.Faults[0].Client, h.Faults[0].Below = -1, 15 // a store revocation below token 15 removes grant 0 (token 10)
	if r = Check(h, AtMost(1)); len(r.Violations) > 0 || r.Margins.Excused != 1 {
		t.Errorf("excused by Below: margins %s, violations %q", r.Margins, r.Violations)
	}
	h.Faults[0].Below = 10 // not below: grant 0 was not removed
	expect(t, h, AtMost(1), "negative margin")

	h = lostThenGranted(800 * ms)
	h.Faults = []Fault{{Kind: "client-kill", Client: 0, Start: 150 * ms, End: 160 * ms, Revokes: true}}
	if r = Check(h, AtMost(1)); r.Margins.Count != 0 || r.Margins.Excused != 1 {
		t.Errorf("a positive margin after a revocation is not measured: %s", r.Margins)
	}

	h = lostThenGranted(800 * ms)
	for i := range h.Grants {
		h.Grants[i].Role = RolePermit // a semaphore's permits exclude nobody
	}
	if r = Check(h, AtMost(2)); r.Margins.Count != 0 {
		t.Errorf("margins of permits: %s", r.Margins)
	}
}
