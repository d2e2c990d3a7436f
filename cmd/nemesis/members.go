package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
)

// membersName is the name of the membership workload among -recipes
// (nemesis.Members, run by nemesis.RunMembership): not in any default
// list, on the backends with group membership (zk, etcd).
var membersName = nemesis.Members().Name

// withMembers adds the membership workload to recipes.
func withMembers(recipes map[string]nemesis.Recipe) map[string]nemesis.Recipe {
	recipes[membersName] = nemesis.Members()
	return recipes
}

// membersTarget is t as a membership run needs it: the target of its
// Members method when it has one (etcd's, whose revoke-lease then revokes
// a member's lease), t itself otherwise.
func membersTarget(t nemesis.Target) nemesis.Target {
	if m, ok := t.(interface{ Members() nemesis.Target }); ok {
		return m.Members()
	}
	return t
}

// memberTally adds up the membership runs' reports.
type memberTally struct {
	runs, views, registrations, calls int
	maxShown, maxConvergence          time.Duration
}

// runMembers runs the membership workload as run i with seed on l's
// target, prints its line (and its violations, with the history kept in
// s.histDir, or in its directory of s.outDir), and adds it to t.
func (s *series) runMembers(ctx context.Context, l *launched, i int, seed uint64, t *tally) (ok bool) {
	t0 := time.Now()
	res, err := nemesis.RunMembership(ctx, membersTarget(l.target), nemesis.Config{Clients: s.clients, Duration: s.runFor, Seed: seed,
		FaultEvery: s.every, Faults: s.kinds, Logf: func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }})
	if err != nil {
		if ctx.Err() == nil {
			fmt.Printf("run %d %s seed %d: %v\n", i, membersName, seed, err)
			t.violations++
		}
		return false
	}
	rep := res.Report
	t.addMembers(rep)
	fmt.Printf("run %d %s seed %d (%v): %s\n", i, membersName, seed, time.Since(t0).Round(time.Second), rep.Summary())
	if s.outDir != "" {
		dir := filepath.Join(s.outDir, fmt.Sprintf("run%d-%s-seed%d", i, membersName, seed))
		if f, err := writeMembers(res.History, dir, "history.json"); err != nil {
			fmt.Printf("  history NOT written: %v\n", err)
		} else {
			fmt.Printf("  history: %s\n", f)
		}
	}
	if len(rep.Violations) == 0 {
		return true
	}
	where := "history NOT written"
	name := fmt.Sprintf("nemesis-%s-seed%d-%s.json", membersName, seed, time.Now().UTC().Format("20060102T150405.000Z"))
	if f, err := writeMembers(res.History, s.histDir, name); err != nil {
		where += ": " + err.Error()
	} else {
		where = "history in " + f
	}
	if l.keep != nil {
		if k := l.keep(); k != "" {
			where += "; " + k
		}
	}
	fmt.Printf("  VIOLATIONS (%s):\n    %s\n", where, strings.Join(rep.Violations, "\n    "))
	return false
}

// writeMembers writes h to a new file name in dir (created if missing).
func writeMembers(h *nemesis.MembershipHistory, dir, name string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f := filepath.Join(dir, name)
	out, err := os.OpenFile(f, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	err = h.WriteJSON(out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", f, err)
	}
	return f, nil
}

// addMembers counts a membership run with report rep.
func (t *tally) addMembers(rep *nemesis.MembershipReport) {
	if t.faults == nil {
		t.faults, t.faultsFailed, t.perRecipe = map[string]int{}, map[string]int{}, map[string]int{}
	}
	t.runs++
	t.perRecipe[membersName]++
	t.violations += len(rep.Violations)
	for k, c := range rep.Faults {
		t.faults[k] += c
		t.faultsFailed[k] += rep.FaultsFailed[k]
		t.faultErrs += rep.FaultsFailed[k]
	}
	m := &t.members
	m.runs++
	m.views += rep.Views
	m.registrations += rep.Registrations
	for _, n := range rep.Calls {
		m.calls += n
	}
	m.maxShown = max(m.maxShown, rep.ShownAfterEnd)
	if rep.Convergence < 0 || m.maxConvergence < 0 {
		m.maxConvergence = -1
	} else {
		m.maxConvergence = max(m.maxConvergence, rep.Convergence)
	}
}

// printMembers writes the membership runs' totals, if any ran.
func (t *tally) printMembers() {
	m := t.members
	if m.runs == 0 {
		return
	}
	conv := "some watcher never converged"
	if m.maxConvergence >= 0 {
		conv = m.maxConvergence.Round(time.Millisecond).String()
	}
	fmt.Printf("membership: %d runs, %d views checked, %d registrations, %d calls that returned (join, update, leave), lost members shown up to %v after their end, max convergence after the heal %s\n",
		m.runs, m.views, m.registrations, m.calls, m.maxShown.Round(time.Millisecond), conv)
}
