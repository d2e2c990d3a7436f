package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/report"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// TestWriteHistory: the history of a run goes to a file of its own, named
// after the recipe, the seed and the time, never over an older one; a
// write that fails is reported, not announced as written.
func TestWriteHistory(t *testing.T) {
	dir := t.TempDir()
	h := &nemesis.History{Recipe: "mutex", Seed: 7, SessionTimeout: 2 * time.Second, FirstGrantAfterHeal: -1,
		Diagnosis: []string{"server 0: ..."}}
	f, err := writeHistory(h, dir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(f) != dir || !strings.HasPrefix(filepath.Base(f), "nemesis-mutex-seed7-") || !strings.HasSuffix(f, "Z.json") {
		t.Errorf("file name %s", f)
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var back nemesis.History
	if err := json.Unmarshal(b, &back); err != nil || back.Seed != 7 || len(back.Diagnosis) != 1 {
		t.Errorf("read back %+v, %v", back, err)
	}
	time.Sleep(2 * time.Millisecond)
	g, err := writeHistory(h, dir)
	if err != nil || g == f {
		t.Errorf("second write: %s, %v (first %s)", g, err, f)
	}

	missing := filepath.Join(dir, "no", "such", "dir")
	if _, err := writeHistory(h, missing); err == nil {
		t.Error("writing into a missing directory: no error")
	}
	msg := keepEvidence(&launched{}, h, missing)
	if !strings.Contains(msg, "history NOT written") || strings.Contains(msg, "history in") {
		t.Errorf("evidence message %q", msg)
	}
}

// TestRender: a history file is checked again and drawn; one that is
// truncated, from another version or names an unknown recipe gets an error
// that says so (ErrBadHistory) and no page.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	h := &nemesis.History{Recipe: "mutex", Seed: 7, Clients: 2, SessionTimeout: 2 * time.Second, Healed: 900 * time.Millisecond,
		FirstGrantAfterHeal: 950 * time.Millisecond, End: time.Second,
		Grants: []nemesis.Grant{{ID: 0, Client: 1, Role: nemesis.RoleHolder, Token: 10, Granted: 950 * time.Millisecond, Ended: -1}},
		Ops:    []nemesis.Op{{Kind: nemesis.OpGrant, Client: 1, Grant: 0, Token: 10, Call: 950 * time.Millisecond, Return: 950 * time.Millisecond, Live: []int{0}}}}
	var noOps bytes.Buffer // the same history with its ops deleted
	if err := (&nemesis.History{Recipe: h.Recipe, Seed: h.Seed, Clients: h.Clients, SessionTimeout: h.SessionTimeout, Healed: h.Healed,
		FirstGrantAfterHeal: h.FirstGrantAfterHeal, End: h.End, Grants: h.Grants}).WriteJSON(&noOps); err != nil {
		t.Fatal(err)
	}
	f, err := writeHistory(h, dir)
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]nemesis.Recipe{"mutex": nemesis.Mutex()}
	out := filepath.Join(dir, "page")
	if err := render(f, out, all); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(out, report.Page)); err != nil || !strings.Contains(string(b), ">client 1</text>") {
		t.Errorf("page: %v", err)
	}

	for name, c := range map[string]struct{ data, want string }{
		"truncated":       {string(good[:len(good)*2/3]), "truncated"},
		"another version": {strings.Replace(string(good), nemesis.HistoryFormat, "zkrecipes-nemesis-history/9", 1), "history/9"},
		"unknown recipe":  {strings.Replace(string(good), `"mutex"`, `"spinlock"`, 1), `unknown recipe "spinlock"`},
		"contradiction":   {strings.Replace(string(good), `"FirstGrantAfterHeal": 950000000`, `"FirstGrantAfterHeal": 439000000`, 1), "but the grants show 950ms"},
		// drawn as a pass before: 43 grants and no grant op
		"ops deleted":     {noOps.String(), "1 of 1 grants have no grant op"},
		"a JSON array":    {"[" + string(good) + "]", "the input is a JSON array, not a history"},
		"unknown backend": {strings.Replace(string(good), `"Recipe"`, `"Backend": "mongo", "Recipe"`, 1), `backend "mongo" is not one this version knows`},
	} {
		bad := filepath.Join(dir, name+".json")
		if err := os.WriteFile(bad, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name)
		err := render(bad, out, all)
		if !errors.Is(err, nemesis.ErrBadHistory) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: %v; want ErrBadHistory naming the file and %q", name, err, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: something was written to %s", name, out)
		}
	}
}

// TestHeader: a short -duration alone makes short runs; the totals name
// the runs per recipe; the version has no unexpanded build property.
func TestHeader(t *testing.T) {
	for _, c := range []struct {
		run, total time.Duration
		set        bool
		want       time.Duration
	}{
		{time.Minute, 30 * time.Second, false, 30 * time.Second},
		{time.Minute, 10 * time.Minute, false, time.Minute},
		{time.Minute, 30 * time.Second, true, time.Minute},
		{5 * time.Second, 30 * time.Second, true, 5 * time.Second},
	} {
		if got := faultPhase(c.run, c.total, c.set); got != c.want {
			t.Errorf("faultPhase(%v, %v, %t) = %v, want %v", c.run, c.total, c.set, got, c.want)
		}
	}
	recipes := []nemesis.Recipe{nemesis.Mutex(), nemesis.RWLock(), nemesis.Semaphore(2), nemesis.Mutex()}
	if got := counts(recipes, map[string]int{"mutex": 2, "semaphore": 1}); got != "mutex 2, semaphore 1" {
		t.Errorf("counts: %q", got)
	}
	if got := counts(recipes, nil); got != "none" {
		t.Errorf("counts of no run: %q", got)
	}
	for in, want := range map[string]string{
		"3.8.0-${mvngit.commit.id}, built on 2023-01-01 00:00 UTC":                      "3.8.0, built on 2023-01-01 00:00 UTC",
		"3.9.3-c26634f34490bb0ea7a09cc51e05ede3b4e320ee, built on 2024-10-17 23:21 UTC": "3.9.3-c26634f34490bb0ea7a09cc51e05ede3b4e320ee, built on 2024-10-17 23:21 UTC",
	} {
		if got := cleanVersion(in); got != want {
			t.Errorf("cleanVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
