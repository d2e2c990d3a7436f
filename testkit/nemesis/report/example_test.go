package report_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/report"
)

// Draw a run: its page and porcupine's view of each register. A real
// history comes from nemesis.Run, or from a file through
// nemesis.ReadHistory.
func ExampleWrite() {
	h := &nemesis.History{Format: nemesis.HistoryFormat, Recipe: "mutex", Seed: 1, Clients: 1, SessionTimeout: 2 * time.Second,
		Healed: 5 * time.Millisecond, FirstGrantAfterHeal: 10 * time.Millisecond, End: time.Second,
		Grants: []nemesis.Grant{{ID: 0, Client: 0, Role: nemesis.RoleHolder, Token: 4294967381,
			Granted: 10 * time.Millisecond, Ended: 40 * time.Millisecond, Cause: recipe.ErrReleased.Error()}},
		Ops: []nemesis.Op{{Kind: nemesis.OpWrite, Client: 0, Grant: 0, Token: 4294967381, Register: nemesis.RegGuard,
			Value: "c0-g0-0", Outcome: nemesis.Accepted, Seq: 1, Call: 20 * time.Millisecond, Return: 21 * time.Millisecond}},
	}
	rep := nemesis.Check(h, nemesis.AtMost(1))
	dir, err := os.MkdirTemp("", "nemesis-page")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	if err := report.Write(dir, h, rep); err != nil {
		fmt.Println(err)
		return
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.html"))
	for _, f := range files {
		fmt.Println(filepath.Base(f))
	}
	// Output:
	// index.html
	// porcupine-guard.html
}
