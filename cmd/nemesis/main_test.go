package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
	"github.com/zkrecipes/zkrecipes/zktest/nemesis"
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
	msg := keepEvidence(&zktest.Cluster{}, h, missing)
	if !strings.Contains(msg, "history NOT written") || strings.Contains(msg, "history in") {
		t.Errorf("evidence message %q", msg)
	}
}
