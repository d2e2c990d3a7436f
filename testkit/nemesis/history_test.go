package nemesis

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func written(t *testing.T, h *History) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := h.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestReadHistoryRoundTrip(t *testing.T) {
	h := base()
	h.Clients = 2
	h.Faults = []Fault{{Kind: FaultKillLeader, Target: "server 1", Client: -1, Start: 50 * ms, End: 80 * ms}}
	back, err := ReadHistory(bytes.NewReader(written(t, h)))
	if err != nil {
		t.Fatal(err)
	}
	h.Format = HistoryFormat // WriteJSON sets it
	if !reflect.DeepEqual(back, h) {
		t.Errorf("read back\n%+v\nwrote\n%+v", back, h)
	}
}

// TestReadHistoryRefusesBadInput: a file that is truncated, of another
// version or inconsistent gets an error that says so (ErrBadHistory), not
// a history to render blank.
func TestReadHistoryRefusesBadInput(t *testing.T) {
	h := base()
	h.Clients = 2
	good := string(written(t, h))
	bad := map[string]struct{ in, want string }{
		"empty":           {"  \n", "empty input"},
		"truncated":       {good[:len(good)/2], "truncated"},
		"cut after brace": {good[:strings.Index(good, "Grants")], "truncated"},
		"not JSON":        {"nemesis: 3 runs\n", "not JSON"},
		"another version": {strings.Replace(good, HistoryFormat, "zkrecipes-nemesis-history/0", 1), `format "zkrecipes-nemesis-history/0"`},
		"no version":      {strings.Replace(good, `"Format": "`+HistoryFormat+`",`, "", 1), "no Format field"},
		"unknown field":   {strings.Replace(good, `"Recipe"`, `"Flavour": 1, "Recipe"`, 1), "Flavour"},
		"two documents":   {good + good, "invalid character"},
		"a JSON array":    {"[" + good + "]", "the input is a JSON array, not a history"},
		"no clients":      {strings.Replace(good, `"Clients": 2`, `"Clients": 0`, 1), "0 clients"},
		"client range":    {strings.Replace(good, `"Clients": 2`, `"Clients": 1`, 1), "names client 1 of 1"},
		"unknown grant":   {strings.Replace(good, `"Grant": 1`, `"Grant": 7`, 1), "names grant 7"},
		"negative time":   {strings.Replace(good, `"Granted": 10000000`, `"Granted": -5`, 1), "before the run began"},
	}
	for name, c := range bad {
		t.Run(name, func(t *testing.T) {
			if c.in == good {
				t.Fatal("the case changed nothing")
			}
			got, err := ReadHistory(strings.NewReader(c.in))
			if !errors.Is(err, ErrBadHistory) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, %v; want ErrBadHistory mentioning %q", got, err, c.want)
			}
		})
	}
}

// TestReadHistoryRefusesAContradiction: a history whose parts contradict
// each other is refused with the reason, never checked and drawn as a
// pass (a file with its grants, ops and faults emptied kept its recovery:
// "no violation, first grant 439ms after the heal").
func TestReadHistoryRefusesAContradiction(t *testing.T) {
	bad := map[string]struct {
		change func(h *History)
		want   string
	}{
		"emptied": {func(h *History) { h.Grants, h.Ops, h.Faults, h.FirstGrantAfterHeal = nil, nil, nil, 439*ms },
			"first grant after the heal at 900ms recorded as 439ms, but the grants show none"},
		"no grant at the first after the heal": {func(h *History) { h.FirstGrantAfterHeal = 960 * ms }, "recorded as 960ms, but the grants show 950ms"},
		"a grant after the heal not recorded":  {func(h *History) { h.FirstGrantAfterHeal = -1 }, "recorded as none, but the grants show 950ms"},
		"an earlier grant after the heal":      {func(h *History) { h.Healed = 100 * ms }, "recorded as 950ms, but the grants show 110ms"},
		"healed after the end":                 {func(h *History) { h.Healed = 2 * time.Second }, "healed at 2s, outside the run"},
		"ended before granted":                 {func(h *History) { h.Grants[0].Ended = 5 * ms }, "grant 0: ended at 5ms, before granted at 10ms"},
		"granted before asked":                 {func(h *History) { h.Grants[1].Asked = 200 * ms }, "grant 1: granted at 110ms, before asked at 200ms"},
		"ended before the run":                 {func(h *History) { h.Grants[0].Ended = -2 }, "grant 0: ended at -2ns, before the run began"},
		"return before call":                   {func(h *History) { h.Ops[1].Return = 15 * ms }, "op 1 (write): return at 15ms, before call at 20ms"},
		"fault ends before it starts":          {func(h *History) { h.Faults[0].Start = 90 * ms }, "fault 0 (kill-leader): end at 80ms, before start at 90ms"},
		"write before its grant":               {func(h *History) { h.Ops[3].Call = 100 * ms }, "op 3 (write) at 100ms, before its grant 1 was made at 110ms"},
		"write of another client's grant":      {func(h *History) { h.Ops[1].Client = 1 }, "op 1 (write) of client 1 with token 10 names grant 0, client 0's with token 10"},
		"write with another token":             {func(h *History) { h.Ops[1].Token = 11 }, "op 1 (write) of client 0 with token 11 names grant 0"},
		"sample of no grant":                   {func(h *History) { h.Ops[1].Live = []int{0, 9} }, "op 1 (write) samples grant 9"},
		"write of no grant":                    {func(h *History) { h.Ops[1].Grant = -1 }, "op 1 (write) names grant -1"},
		"failed attempt with a grant": {func(h *History) {
			h.Ops = append(h.Ops, Op{Kind: OpAcquire, Client: 1, Grant: 1, Call: 300 * ms, Return: 400 * ms, Err: "context deadline exceeded"})
		}, "op 10 (acquire-failed) names grant 1 (a failed attempt has none: -1)"},
		"unknown op kind":      {func(h *History) { h.Ops[0].Kind = "lease" }, "op 0 (lease): unknown kind"},
		"unknown outcome":      {func(h *History) { h.Ops[1].Outcome = "lost" }, `op 1 (write): outcome "lost"`},
		"write of no register": {func(h *History) { h.Ops[1].Register = "" }, "op 1 (write): no register"},
		// a file whose grant ops were deleted drew as a pass (43 grants, no sample)
		"grants without their grant ops": {func(h *History) {
			h.Ops = slices.DeleteFunc(h.Ops, func(o Op) bool { return o.Kind == OpGrant })
		}, "3 of 3 grants have no grant op (the first: grant 0)"},
		"two grant ops of a grant": {func(h *History) { h.Ops = append(h.Ops, h.Ops[0]) }, "grant 0 has 2 grant ops"},
		"unknown backend":          {func(h *History) { h.Backend = "mongo" }, `backend "mongo" is not one this version knows (etcd, k8s, pg, redis, zk)`},
		"fault of another backend": {func(h *History) { h.Backend = "redis" }, "fault 0 (kill-leader): backend redis has no such fault kind"},
	}
	for name, c := range bad {
		t.Run(name, func(t *testing.T) {
			h := base()
			h.Clients = 2
			h.Backend = "zk"
			h.Faults = []Fault{{Kind: FaultKillLeader, Target: "server 1", Client: -1, Start: 50 * ms, End: 80 * ms}}
			if _, err := ReadHistory(bytes.NewReader(written(t, h))); err != nil {
				t.Fatalf("the history before the change: %v", err)
			}
			c.change(h)
			got, err := ReadHistory(bytes.NewReader(written(t, h)))
			if !errors.Is(err, ErrBadHistory) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, %v; want ErrBadHistory mentioning %q", got, err, c.want)
			}
		})
	}
}

// TestReadHistoryV1: a history of format /1 still reads, its faults' Zxid
// as Below; /2 refuses Zxid.
func TestReadHistoryV1(t *testing.T) {
	h := base()
	h.Clients = 2
	h.Faults = []Fault{{Kind: FaultExpire, Target: "client 0", Client: 0, Start: 105 * ms, End: 106 * ms, Revokes: true, Certain: true, Below: 15}}
	v2 := string(written(t, h))
	v1 := strings.Replace(strings.Replace(v2, HistoryFormat, "zkrecipes-nemesis-history/1", 1), `"Below"`, `"Zxid"`, 1)
	back, err := ReadHistory(strings.NewReader(v1))
	if err != nil {
		t.Fatal(err)
	}
	if back.Format != HistoryFormat || len(back.Faults) != 1 || back.Faults[0].Below != 15 || back.Faults[0].Kind != FaultExpire {
		t.Errorf("read back %+v", back)
	}
	if _, err := ReadHistory(strings.NewReader(strings.Replace(v1, "history/1", "history/2", 1))); !errors.Is(err, ErrBadHistory) || !strings.Contains(err.Error(), "Zxid") {
		t.Errorf("/2 with Zxid: %v", err)
	}
}
