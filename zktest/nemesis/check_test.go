package nemesis

import (
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

const ms = time.Millisecond

var released = recipe.ErrReleased.Error()

// base is a correct history: grant 0 (token 10) writes, ends; grant 1
// (token 20) writes over it; a late write of grant 0 is refused.
func base() *History {
	return &History{
		Recipe: "mutex", SessionTimeout: 2 * time.Second, Healed: 900 * ms, FirstGrantAfterHeal: 950 * ms, End: time.Second,
		Grants: []Grant{
			{ID: 0, Client: 0, Role: RoleHolder, Token: 10, Asked: 0, Granted: 10 * ms, Ended: 100 * ms, Cause: released},
			{ID: 1, Client: 1, Role: RoleHolder, Token: 20, Asked: 5 * ms, Granted: 110 * ms, Ended: 200 * ms, Cause: released},
			{ID: 2, Client: 0, Role: RoleHolder, Token: 30, Asked: 900 * ms, Granted: 950 * ms, Ended: 990 * ms, Cause: released},
		},
		Ops: []Op{
			{Kind: OpGrant, Client: 0, Grant: 0, Token: 10, Call: 10 * ms, Return: 10 * ms, Live: []int{0}},
			{Kind: OpWrite, Client: 0, Grant: 0, Token: 10, Register: RegZnode, Value: "a", Outcome: Accepted, Call: 20 * ms, Return: 30 * ms, Live: []int{0}},
			{Kind: OpGrant, Client: 1, Grant: 1, Token: 20, Call: 110 * ms, Return: 110 * ms, Live: []int{1}},
			{Kind: OpWrite, Client: 1, Grant: 1, Token: 20, Register: RegZnode, Value: "b", Outcome: Accepted, Prev: State{10, "a"}, Call: 120 * ms, Return: 130 * ms, Live: []int{1}},
			{Kind: OpWrite, Client: 0, Grant: 0, Token: 10, Register: RegZnode, Value: "a2", Outcome: Stale, Call: 140 * ms, Return: 150 * ms},
			{Kind: OpWrite, Client: 0, Grant: 0, Token: 10, Register: RegGuard, Value: "g", Outcome: Accepted, Seq: 1, Call: 20 * ms, Return: 21 * ms, Live: []int{0}},
			{Kind: OpWrite, Client: 1, Grant: 1, Token: 20, Register: RegGuard, Value: "h", Outcome: Accepted, Prev: State{10, "g"}, Seq: 2, Call: 120 * ms, Return: 121 * ms, Live: []int{1}},
			{Kind: OpWrite, Client: 0, Grant: 0, Token: 10, Register: RegGuard, Value: "g2", Outcome: Stale, Call: 140 * ms, Return: 141 * ms},
			{Kind: OpWrite, Client: 1, Grant: 1, Token: 20, Register: RegZnode, Value: "b2", Outcome: Unknown, Call: 160 * ms, Return: 170 * ms},
		},
	}
}

// expect checks that Check finds a violation mentioning want in h (none if
// want is ""), and returns where it locates it.
func expect(t *testing.T, h *History, allowed Allowed, want string) Span {
	t.Helper()
	r := Check(h, allowed)
	if len(r.Where) != len(r.Violations) {
		t.Fatalf("%d violations, %d places", len(r.Violations), len(r.Where))
	}
	if want == "" {
		if len(r.Violations) > 0 {
			t.Fatalf("violations in a correct history: %q", r.Violations)
		}
		return nowhere
	}
	for i, v := range r.Violations {
		if strings.Contains(v, want) {
			return r.Where[i]
		}
	}
	t.Fatalf("no violation mentioning %q; got %q", want, r.Violations)
	return nowhere
}

func expectAt(t *testing.T, got, want Span) {
	t.Helper()
	if got != want || !got.Known() {
		t.Errorf("violation located at %v, want %v", got, want)
	}
}

func TestCheckAcceptsACorrectHistory(t *testing.T) {
	h := base()
	r := Check(h, AtMost(1))
	expect(t, h, AtMost(1), "")
	if r.StaleRejected() != 2 || r.Writes[RegZnode][Unknown] != 1 {
		t.Fatalf("counts: %s", r.Summary())
	}
}

func TestCheckCatchesTwoLiveHolders(t *testing.T) {
	h := base()
	h.Ops[2].Live = []int{0, 1} // grant 0 still live when grant 1 was made
	// from the first of the two grants to the sample
	expectAt(t, expect(t, h, AtMost(1), "lease contexts live at once"), Span{10 * ms, 110 * ms})
}

func TestCheckCatchesAReaderBesideAWriter(t *testing.T) {
	h := base()
	h.Grants[0].Role, h.Grants[1].Role = RoleReader, RoleWriter
	h.Ops[2].Live = []int{0, 1}
	expect(t, h, ReadersOrOneWriter, "lease contexts live at once")
	h.Grants[1].Role = RoleReader // two readers are fine
	expect(t, h, ReadersOrOneWriter, "")
}

func TestCheckCatchesASemaphoreOverGrant(t *testing.T) {
	h := base()
	h.Ops[2].Live = []int{0, 1}
	expect(t, h, AtMost(2), "")
	h.Ops[2].Live = []int{0, 1, 2}
	expect(t, h, AtMost(2), "lease contexts live at once")
}

func TestCheckExcusesOnlyForcedRevocations(t *testing.T) {
	h := base()
	h.Ops[2].Live = []int{0, 1}
	// Client 0's session was expired on demand before grant 1: its lease
	// may look live until its client hears of it.
	h.Faults = []Fault{{Kind: FaultExpire, Client: 0, Start: 105 * ms, End: 106 * ms, Revokes: true, Certain: true, Zxid: 15}}
	h.Grants[0].Cause = recipe.ErrSuspended.Error()
	r := Check(h, AtMost(1))
	if len(r.Violations) > 0 || r.Excused != 1 {
		t.Fatalf("excused %d, violations %q", r.Excused, r.Violations)
	}
	// An expiry of another client's session excuses nothing.
	h.Faults[0].Client = 1
	expect(t, h, AtMost(1), "lease contexts live at once")
	// A revocation whose zxid is below the lease's token did not hit it.
	h.Faults[0].Zxid = 10
	expect(t, h, AtMost(1), "lease contexts live at once")
	h.Faults[0].Zxid = 15
	// A lease its holder gave up was not revoked.
	h.Faults[0].Client = 0
	h.Grants[0].Cause = released
	expect(t, h, AtMost(1), "lease contexts live at once")
	h.Grants[0].Cause = recipe.ErrSuspended.Error()
	// The revoked lease must end within the session timeout + 1 s.
	h.Faults[0].Client = 0
	h.Grants[0].Ended = 5 * time.Second
	expectAt(t, expect(t, h, AtMost(1), "was still live"), Span{105 * ms, 5 * time.Second})
}

// TestCheckExcusesARevocationDuringAWrite: a znode write samples the live
// leases when its setData is answered, so a revocation that began after
// the write's call but before its return may explain an overlap in its
// sample (nemesis run mutex seed 10: the directory was deleted while a
// write of the victim's was in flight, and its sample was reported as
// two live holders).
func TestCheckExcusesARevocationDuringAWrite(t *testing.T) {
	h := base()
	h.Grants[0].Cause = recipe.ErrNodeDeleted.Error()
	h.Grants[1].Granted = 25 * ms
	h.Ops[2].Call, h.Ops[2].Return = 25*ms, 25*ms
	h.Ops[1].Live = []int{0, 1} // read right after the setData, at 30 ms
	h.Faults = []Fault{{Kind: FaultDeleteDir, Client: -1, Start: 22 * ms, End: 24 * ms, Revokes: true, Certain: true, Zxid: 15}}
	r := Check(h, AtMost(1))
	if len(r.Violations) > 0 || r.Excused != 1 {
		t.Fatalf("excused %d, violations %q", r.Excused, r.Violations)
	}
	// A revocation that began after the sample's return excuses nothing.
	h.Faults[0].Start, h.Faults[0].End = 31*ms, 32*ms
	expect(t, h, AtMost(1), "lease contexts live at once")
}

func TestCheckCatchesAStaleWriteApplied(t *testing.T) {
	h := base()
	h.Ops[4].Outcome, h.Ops[4].Prev = Accepted, State{20, "b"} // token 10 over token 20
	expect(t, h, AtMost(1), "was applied over token")
	h = base()
	h.Ops[7].Outcome, h.Ops[7].Prev, h.Ops[7].Seq = Accepted, State{20, "h"}, 3
	expect(t, h, AtMost(1), "was applied over token")
}

func TestCheckCatchesALostUpdate(t *testing.T) {
	h := base()
	h.Ops[3].Prev = State{} // b overwrote the initial state, as a did
	expectAt(t, expect(t, h, AtMost(1), "lost update"), Span{20 * ms, 130 * ms})
	expect(t, h, AtMost(1), "not linearizable")
}

func TestCheckCatchesANonLinearizableHistory(t *testing.T) {
	h := base()
	// The stale refusal came before any higher token was written.
	h.Ops[4].Call, h.Ops[4].Return = 40*ms, 50*ms
	// located at the refusal: no order places it after a write of token 20
	expectAt(t, expect(t, h, AtMost(1), "not linearizable"), Span{40 * ms, 50 * ms})
	// A write that claims to overwrite a value nobody wrote.
	h = base()
	h.Ops[3].Prev = State{10, "zz"}
	expect(t, h, AtMost(1), "not linearizable")
}

func TestCheckCatchesAGuardOutOfOrder(t *testing.T) {
	h := base()
	h.Ops[6].Prev = State{} // the guard's second write claims it found it empty
	expectAt(t, expect(t, h, AtMost(1), "but the register held"), Span{120 * ms, 121 * ms})
}

func TestCheckCatchesASlowRecovery(t *testing.T) {
	h := base()
	h.FirstGrantAfterHeal = h.Healed + 3100*ms
	expectAt(t, expect(t, h, AtMost(1), "no grant within"), Span{h.Healed, h.FirstGrantAfterHeal})
	h.FirstGrantAfterHeal = -1
	expectAt(t, expect(t, h, AtMost(1), "no grant within"), Span{h.Healed, h.End})
}
