package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/report"
)

// series is the runs of one backend.
type series struct {
	name                 string
	launch               func() (*launched, error)
	recipes              []nemesis.Recipe
	kinds                []string
	db                   *sql.DB
	total, runFor, every time.Duration
	seed                 uint64
	clients              int
	histDir, outDir      string
}

// run runs the recipes in turn on *lp's target. After a run with a
// violation the servers are closed (their directories kept) and fresh
// ones are launched for the next run: a server bug that made the replicas
// diverge (see docs/reliability.md) would otherwise carry over into later
// runs.
func (s *series) run(ctx context.Context, lp **launched) int {
	l := *lp
	start := time.Now()
	var t tally
	fmt.Printf("nemesis %s: %s, %d clients, %v of faults per run, new runs for %v, first seed %d\n",
		s.name, l.about, s.clients, s.runFor, s.total, s.seed)
	for i := 0; time.Since(start) < s.total && ctx.Err() == nil; i++ {
		r := s.recipes[i%len(s.recipes)]
		seed := s.seed + uint64(i)
		if r.Name == membersName {
			if !s.runMembers(ctx, l, i, seed, &t) && ctx.Err() == nil && time.Since(start) < s.total {
				if l = s.fresh(lp); l == nil {
					t.violations++
					break
				}
			}
			continue
		}
		t0 := time.Now()
		res, err := nemesis.RunTarget(ctx, l.target, r, nemesis.Config{Clients: s.clients, Duration: s.runFor, Seed: seed, FaultEvery: s.every,
			Faults: s.kinds, SQL: s.db, Logf: func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			fmt.Printf("run %d %s seed %d: %v\n", i, r.Name, seed, err)
			t.violations++
			continue
		}
		rep := res.Report
		t.add(r.Name, rep)
		if st := rep.Stall; st.Known() && (!t.maxStall.Known() || st.To-st.From > t.maxStall.To-t.maxStall.From) {
			t.maxStall, t.maxStallRun = st, fmt.Sprintf("run %d %s seed %d", i, r.Name, seed)
		}
		fmt.Printf("run %d %s seed %d (%v): %s\n", i, r.Name, seed, time.Since(t0).Round(time.Second), rep.Summary())
		if s.outDir != "" {
			dir := filepath.Join(s.outDir, fmt.Sprintf("run%d-%s-seed%d", i, r.Name, seed))
			if err := writeRun(dir, res.History, rep); err != nil {
				fmt.Printf("  page NOT written: %v\n", err)
			} else {
				fmt.Printf("  page: %s\n", filepath.Join(dir, report.Page))
			}
		}
		for _, e := range rep.ExcusedExamples {
			fmt.Printf("  excused: %s\n", e)
		}
		if len(rep.Violations) > 0 {
			fmt.Printf("  VIOLATIONS (%s):\n    %s\n", keepEvidence(l, res.History, s.histDir), strings.Join(rep.Violations, "\n    "))
			if time.Since(start) < s.total && ctx.Err() == nil {
				if l = s.fresh(lp); l == nil {
					t.violations++
					break
				}
			}
		}
	}
	t.print(s.name, time.Since(start), s.recipes)
	t.printMembers()
	untested := t.ineffective()
	if len(untested) > 0 {
		fmt.Printf("NOT TESTED: every attempt of %s failed or may not have taken effect (see the runs' lines)\n", strings.Join(untested, ", "))
	}
	switch {
	case t.violations > 0:
		return 1
	case ctx.Err() != nil:
		fmt.Printf("interrupted (%v): the figures cover the %d complete run(s) only\n", context.Cause(ctx), t.runs)
		return 130
	case t.runs == 0, len(untested) > 0: // a kind it could not inject was not tested
		return 1
	}
	return 0
}

// fresh closes the servers of *lp (their directories kept) and launches
// fresh ones for the next runs, in *lp; nil (and *lp nil) if the launch
// failed.
func (s *series) fresh(lp **launched) *launched {
	if err := (*lp).close(); err != nil {
		fmt.Printf("  closing the servers: %v\n", err)
	}
	*lp = nil
	l, err := s.launch()
	if err != nil {
		fmt.Printf("  fresh servers for the next runs: %v\n", err)
		return nil
	}
	*lp = l
	fmt.Printf("  next runs on fresh servers: %s\n", l.about)
	return l
}

// ineffective lists the fault kinds tried in the runs whose every attempt
// failed or may not have taken effect.
func (t *tally) ineffective() []string {
	var out []string
	for k, n := range t.faults {
		if n > 0 && t.faultsFailed[k] >= n {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// tally adds up the runs' reports.
type tally struct {
	runs, ops, grants, stale, violations, excused, writes, faultErrs int
	faults, faultsFailed                                             map[string]int
	perRecipe                                                        map[string]int
	maxRecovery                                                      time.Duration
	maxStall                                                         nemesis.Span // the longest stall of any run
	maxStallRun                                                      string       // ... in this run
	margins                                                          []time.Duration
	marginsExcused                                                   int
	members                                                          memberTally // the membership runs'
}

// add counts a run of recipe with report rep.
func (t *tally) add(recipe string, rep *nemesis.Report) {
	if t.faults == nil {
		t.faults, t.faultsFailed, t.perRecipe = map[string]int{}, map[string]int{}, map[string]int{}
	}
	t.runs++
	t.perRecipe[recipe]++
	t.ops += rep.Operations()
	t.grants += rep.Grants
	t.stale += rep.StaleRejected()
	t.excused += rep.Excused
	t.faultErrs += rep.FaultErrors
	t.violations += len(rep.Violations)
	for _, m := range rep.Writes {
		for _, c := range m {
			t.writes += c
		}
	}
	for k, c := range rep.Faults {
		t.faults[k] += c
		t.faultsFailed[k] += rep.FaultsFailed[k]
	}

	t.maxRecovery = max(t.maxRecovery, rep.Recovery)
	t.margins = append(t.margins, rep.Margins.Values...)
	t.marginsExcused += rep.Margins.Excused
}

// print writes backend's totals, after took.
func (t *tally) print(backend string, took time.Duration, recipes []nemesis.Recipe) {
	seen := make([]string, 0, len(t.faults))
	nf := 0
	for k, c := range t.faults {
		seen = append(seen, k)
		nf += c
	}
	slices.Sort(seen)
	fmt.Printf("\ntotal %s: %v, %d runs (%s), %d operations (%d grants, %d register writes), %d stale writes rejected, %d excused samples, max recovery %v, %d violations\n",
		backend, took.Round(time.Second), t.runs, counts(recipes, t.perRecipe), t.ops, t.grants, t.writes, t.stale, t.excused, t.maxRecovery.Round(time.Millisecond), t.violations)
	fmt.Printf("margins (holder's context ended -> another client granted): %s\n", distribution(t.margins, t.marginsExcused))
	if t.maxStallRun != "" {
		fmt.Printf("longest stall (no grant while a client asked): %v, %s, from %v to %v\n",
			(t.maxStall.To - t.maxStall.From).Round(time.Millisecond), t.maxStallRun,
			t.maxStall.From.Round(time.Millisecond), t.maxStall.To.Round(time.Millisecond))
	}
	fmt.Printf("faults: %d attempted (%d failed or of uncertain effect)\n", nf, t.faultErrs)
	for _, k := range seen {
		failed := ""
		if f := t.faultsFailed[k]; f > 0 {
			failed = fmt.Sprintf(" (%d failed)", f)
		}
		fmt.Printf("  %-17s %d%s\n", k, t.faults[k], failed)
	}
}

// distribution writes the margins ms: their count, smallest, 10th, 50th
// and 90th percentiles, and largest; and how many were excused.
func distribution(ms []time.Duration, excused int) string {
	s := "none measured"
	if len(ms) > 0 {
		ms = slices.Clone(ms)
		slices.Sort(ms)
		q := func(p int) time.Duration { return ms[(len(ms)-1)*p/100].Round(time.Millisecond) }
		s = fmt.Sprintf("%d measured: min %v, p10 %v, median %v, p90 %v, max %v", len(ms), q(0), q(10), q(50), q(90), q(100))
	}
	if excused > 0 {
		s += fmt.Sprintf(" (%d lost leases excused by a revocation)", excused)
	}
	return s
}
