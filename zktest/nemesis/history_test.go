package nemesis

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
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
