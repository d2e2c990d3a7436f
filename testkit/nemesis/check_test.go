package nemesis

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
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
			{Kind: OpGrant, Client: 0, Grant: 2, Token: 30, Call: 950 * ms, Return: 950 * ms, Live: []int{2}},
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
	h.Grants[0].Ended = 150 * ms
	// the overlap: from grant 1 to the end of grant 0
	expectAt(t, expect(t, h, AtMost(1), "lease contexts live at once"), Span{110 * ms, 150 * ms})
	// a holder records its end just before it releases, so a sample can
	// see a lease live after its end: the overlap lasts to the sample
	h.Grants[0].Ended = 100 * ms
	expectAt(t, expect(t, h, AtMost(1), "lease contexts live at once"), Span{110 * ms, 110 * ms})
}

// TestCheckLocatesTheOverlap: a violation of leases live at once is
// located at their overlap, not from the first grant (the broken recipe's
// page outlined client 0's lease from its grant at 164 ms to client 2's
// grant at 214 ms, when only one holder existed, and left the overlap,
// 214 to 249 ms, outside).
func TestCheckLocatesTheOverlap(t *testing.T) {
	us := time.Microsecond
	h := &History{
		Recipe: "broken-mutex", Clients: 3, SessionTimeout: 2 * time.Second, Healed: 900 * ms, FirstGrantAfterHeal: -1, End: time.Second,
		Grants: []Grant{
			{ID: 0, Client: 0, Role: RoleHolder, Token: tok(1, 17), Asked: 100 * ms, Granted: 164412 * us, Ended: 249 * ms, Cause: released},
			{ID: 1, Client: 2, Role: RoleHolder, Token: tok(1, 18), Asked: 150 * ms, Granted: 214078 * us, Ended: 400 * ms, Cause: released},
			{ID: 2, Client: 1, Role: RoleHolder, Token: tok(1, 19), Asked: 150 * ms, Granted: 230 * ms, Ended: -1},
		},
		Ops: []Op{
			{Kind: OpGrant, Client: 0, Grant: 0, Token: tok(1, 17), Call: 164412 * us, Return: 164412 * us, Live: []int{0}},
			{Kind: OpGrant, Client: 2, Grant: 1, Token: tok(1, 18), Call: 214078 * us, Return: 214078 * us, Live: []int{0, 1}},
			// a write called before grant 1, read after it
			{Kind: OpWrite, Client: 0, Grant: 0, Token: tok(1, 17), Register: RegZnode, Value: "a", Outcome: Accepted, Call: 200 * ms, Return: 240 * ms, Live: []int{0, 1}},
			// three at once (a lease still live at the end of the run)
			{Kind: OpGrant, Client: 1, Grant: 2, Token: tok(1, 19), Call: 230 * ms, Return: 230 * ms, Live: []int{0, 1, 2}},
		},
	}
	r := Check(h, AtMost(1))
	var where []Span
	for i, v := range r.Violations {
		if strings.Contains(v, "lease contexts live at once") {
			where = append(where, r.Where[i])
		}
	}
	want := []Span{{214078 * us, 249 * ms}, {214078 * us, 249 * ms}, {230 * ms, 249 * ms}}
	if fmt.Sprint(where) != fmt.Sprint(want) {
		t.Errorf("located at %v, want %v", where, want)
	}
	// the tokens as the history has them and as the timeline labels them
	if v := r.Violations[0]; !strings.Contains(v, "grant 0: client 0 holder token 4294967313 (1:17) granted") {
		t.Errorf("violation %q", v)
	}
	// grants 1 and 2 alone: to the end of grant 1
	h.Ops[3].Live = []int{1, 2}
	h.Ops = h.Ops[1:2:2]
	h.Ops = append(h.Ops, Op{Kind: OpGrant, Client: 1, Grant: 2, Token: tok(1, 19), Call: 230 * ms, Return: 230 * ms, Live: []int{1, 2}})
	h.Ops[0].Live = []int{1}
	expectAt(t, expect(t, h, AtMost(1), "lease contexts live at once"), Span{230 * ms, 400 * ms})
	// a lease still live at the end: to the end of the run
	h.Grants[1].Ended = -1
	expectAt(t, expect(t, h, AtMost(1), "lease contexts live at once"), Span{230 * ms, time.Second})
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
	h.Faults = []Fault{{Kind: FaultExpire, Client: 0, Start: 105 * ms, End: 106 * ms, Revokes: true, Certain: true, Below: 15}}
	h.Grants[0].Cause = recipe.ErrSuspended.Error()
	r := Check(h, AtMost(1))
	if len(r.Violations) > 0 || r.Excused != 1 {
		t.Fatalf("excused %d, violations %q", r.Excused, r.Violations)
	}
	// An expiry of another client's session excuses nothing.
	h.Faults[0].Client = 1
	expect(t, h, AtMost(1), "lease contexts live at once")
	// A revocation whose zxid is below the lease's token did not hit it.
	h.Faults[0].Below = 10
	expect(t, h, AtMost(1), "lease contexts live at once")
	h.Faults[0].Below = 15
	// A revoked lease its holder released before it heard of the
	// revocation was revoked all the same.
	h.Faults[0].Client = 0
	h.Grants[0].Cause = released
	expect(t, h, AtMost(1), "")
	// The revoked lease must end within the session timeout + 1 s, however
	// it ends.
	h.Grants[0].Ended = 5 * time.Second
	expectAt(t, expect(t, h, AtMost(1), "was still live"), Span{105 * ms, 5 * time.Second})
	h.Grants[0].Cause = recipe.ErrSuspended.Error()
	expectAt(t, expect(t, h, AtMost(1), "was still live"), Span{105 * ms, 5 * time.Second})
}

// tok is the token of zxid epoch:counter.
func tok(epoch, counter uint64) fence.Token { return fence.Token(epoch<<32 | counter) }

// revokedSemaphore is the history of nemesis run semaphore seed 3 (TestNemesis)
// around its delete-dir, which ran from 2.182 s to 3.081 s because clients
// kept creating nodes meanwhile (zxid 3:38): three permits (tokens 3:30,
// 3:27, 3:32, all below it, so all three nodes were removed) were live at
// once, each released by its holder before it heard of the deletion.
func revokedSemaphore() *History {
	return &History{
		Recipe: "semaphore", Clients: 4, SessionTimeout: 2 * time.Second, Healed: 6021 * ms, FirstGrantAfterHeal: 6050 * ms, End: 6105 * ms,
		Grants: []Grant{
			{ID: 11, Client: 0, Role: RolePermit, Token: tok(3, 30), Asked: 2703 * ms, Granted: 2821 * ms, Ended: 2853 * ms, Cause: released},
			{ID: 12, Client: 3, Role: RolePermit, Token: tok(3, 27), Asked: 2668 * ms, Granted: 2832 * ms, Ended: 2849 * ms, Cause: released},
			{ID: 13, Client: 1, Role: RolePermit, Token: tok(3, 32), Asked: 2791 * ms, Granted: 2841 * ms, Ended: 2845 * ms, Cause: released},
			{ID: 14, Client: 0, Role: RolePermit, Token: tok(3, 44), Asked: 2908 * ms, Granted: 3096 * ms, Ended: 3121 * ms, Cause: released},
		},
		Ops: []Op{
			{Kind: OpGrant, Client: 0, Grant: 11, Token: tok(3, 30), Call: 2821 * ms, Return: 2821 * ms, Live: []int{11}},
			{Kind: OpGrant, Client: 3, Grant: 12, Token: tok(3, 27), Call: 2832 * ms, Return: 2832 * ms, Live: []int{11, 12}},
			{Kind: OpProbe, Client: 3, Grant: 12, Token: tok(3, 27), Call: 2840 * ms, Return: 2840 * ms, Live: []int{11, 12}},
			{Kind: OpGrant, Client: 1, Grant: 13, Token: tok(3, 32), Call: 2841 * ms, Return: 2841 * ms, Live: []int{11, 12, 13}},
			{Kind: OpProbe, Client: 1, Grant: 13, Token: tok(3, 32), Call: 2842 * ms, Return: 2842 * ms, Live: []int{11, 12, 13}},
			{Kind: OpProbe, Client: 0, Grant: 11, Token: tok(3, 30), Call: 2845 * ms, Return: 2845 * ms, Live: []int{11, 12}},
			{Kind: OpGrant, Client: 0, Grant: 14, Token: tok(3, 44), Call: 3096 * ms, Return: 3096 * ms, Live: []int{14}},
		},
		Faults: []Fault{
			{Kind: FaultDeleteDir, Target: "/nemesis/semaphore/lock", Client: -1, Start: 2182 * ms, End: 3081 * ms, Revokes: true, Certain: true, Below: tok(3, 38)},
		},
	}
}

// TestCheckExcusesReleasedLeasesWhoseNodesWereRemoved: how a lease ended
// does not say whether a fault removed its node (false positive on
// semaphore seed 3: three permits, all below the deletion's zxid, all
// released by holders that had not heard of it yet).
func TestCheckExcusesReleasedLeasesWhoseNodesWereRemoved(t *testing.T) {
	r := Check(revokedSemaphore(), AtMost(2))
	if len(r.Violations) > 0 || r.Excused != 2 {
		t.Fatalf("excused %d, violations %q", r.Excused, r.Violations)
	}
	// One removed node is enough to explain a third permit.
	h := revokedSemaphore()
	h.Faults[0].Below = tok(3, 28)
	expect(t, h, AtMost(2), "")
	// Whatever the excuse, the removed leases end within the bound.
	h = revokedSemaphore()
	h.Grants[1].Ended = h.Faults[0].End + h.SessionTimeout + 1100*ms
	expectAt(t, expect(t, h, AtMost(2), "grant 12 (client 3, token 12884901915 (3:27)) was still live"), Span{2182 * ms, h.Grants[1].Ended})
}

// TestCheckCatchesAnOverlapNoRemovalExplains: the same three permits are a
// violation when the deletion removed none of their nodes (they were all
// made after it), when it began only after the samples, or when a removed
// lease is still live beside others after the bound.
func TestCheckCatchesAnOverlapNoRemovalExplains(t *testing.T) {
	h := revokedSemaphore()
	h.Faults[0].Below = tok(3, 26)
	// the three permits overlap from the third grant to the first end
	expectAt(t, expect(t, h, AtMost(2), "3 lease contexts live at once"), Span{2841 * ms, 2845 * ms})
	h = revokedSemaphore()
	h.Faults[0].Start = 2843 * ms
	expectAt(t, expect(t, h, AtMost(2), "3 lease contexts live at once"), Span{2841 * ms, 2845 * ms})
	// Grant 12's node was removed, but its context is live 3 s after the
	// deletion ended, beside two newer permits.
	h = revokedSemaphore()
	late := h.Faults[0].End + h.SessionTimeout + time.Second + 10*ms
	h.Grants[1].Ended = late + 50*ms
	h.Grants = append(h.Grants,
		Grant{ID: 15, Client: 1, Role: RolePermit, Token: tok(3, 90), Asked: late - 50*ms, Granted: late - 5*ms, Ended: late + 20*ms, Cause: released},
		Grant{ID: 16, Client: 2, Role: RolePermit, Token: tok(3, 91), Asked: late - 40*ms, Granted: late, Ended: late + 30*ms, Cause: released})
	h.Ops = append(h.Ops, Op{Kind: OpGrant, Client: 2, Grant: 16, Token: tok(3, 91), Call: late, Return: late, Live: []int{12, 15, 16}})
	expect(t, h, AtMost(2), "was still live")
	expectAt(t, expect(t, h, AtMost(2), "3 lease contexts live at once"), Span{late, late + 20*ms})
}

// TestCheckBoundsAnUncertainRevocation: a fault of uncertain effect (an
// expiry whose reply was lost) may have removed its client's nodes, so it
// excuses their leases too, but only up to its bound, like a certain one.
func TestCheckBoundsAnUncertainRevocation(t *testing.T) {
	h := &History{
		Recipe: "mutex", Clients: 2, SessionTimeout: 2 * time.Second, Healed: 4500 * ms, FirstGrantAfterHeal: 4600 * ms, End: 5 * time.Second,
		Grants: []Grant{
			{ID: 0, Client: 0, Role: RoleHolder, Token: 10, Asked: 5 * ms, Granted: 10 * ms, Ended: 4 * time.Second, Cause: released},
			{ID: 1, Client: 1, Role: RoleHolder, Token: 20, Asked: 150 * ms, Granted: 200 * ms, Ended: 300 * ms, Cause: released},
			{ID: 2, Client: 1, Role: RoleHolder, Token: 30, Asked: 3400 * ms, Granted: 3500 * ms, Ended: 3600 * ms, Cause: released},
			{ID: 3, Client: 1, Role: RoleHolder, Token: 40, Asked: 4550 * ms, Granted: 4600 * ms, Ended: 4700 * ms, Cause: released},
		},
		Ops: []Op{
			{Kind: OpGrant, Client: 0, Grant: 0, Token: 10, Call: 10 * ms, Return: 10 * ms, Live: []int{0}},
			{Kind: OpGrant, Client: 1, Grant: 1, Token: 20, Call: 200 * ms, Return: 200 * ms, Live: []int{0, 1}},
			{Kind: OpGrant, Client: 1, Grant: 3, Token: 40, Call: 4600 * ms, Return: 4600 * ms, Live: []int{3}},
		},
		Faults: []Fault{{Kind: FaultExpire, Target: "client 0", Client: 0, Start: 100 * ms, End: 110 * ms, Revokes: true, Err: "connection lost"}},
	}
	r := Check(h, AtMost(1))
	if len(r.Violations) > 0 || r.Excused != 1 {
		t.Fatalf("excused %d, violations %q", r.Excused, r.Violations)
	}
	// A sample after the bound (3.11 s) is not excused.
	h.Ops = append(h.Ops, Op{Kind: OpGrant, Client: 1, Grant: 2, Token: 30, Call: 3500 * ms, Return: 3500 * ms, Live: []int{0, 2}})
	expectAt(t, expect(t, h, AtMost(1), "lease contexts live at once"), Span{3500 * ms, 3600 * ms})
	// A grant asked for after the fault ended was not hit by it.
	h.Ops = h.Ops[:3]
	h.Faults[0].Start, h.Faults[0].End = 1*ms, 3*ms
	expectAt(t, expect(t, h, AtMost(1), "lease contexts live at once"), Span{200 * ms, 300 * ms})
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
	h.Faults = []Fault{{Kind: FaultDeleteDir, Client: -1, Start: 22 * ms, End: 24 * ms, Revokes: true, Certain: true, Below: 15}}
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

func TestTokenText(t *testing.T) {
	for tk, want := range map[fence.Token][2]string{
		tok(1, 17): {"1:17", "4294967313 (1:17)"},
		tok(5, 0):  {"5:0", "21474836480 (5:0)"},
		10:         {"10", "10"}, // not a zxid of a running ensemble
	} {
		if got := [2]string{ShortToken(tk), TokenText(tk)}; got != want {
			t.Errorf("token %d: %q, want %q", uint64(tk), got, want)
		}
	}
}
