package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/report"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// faultPhase is each run's fault phase: -run if it was given (set), else
// its default capped at the total duration, so that a short -duration
// alone is a short command.
func faultPhase(run, total time.Duration, set bool) time.Duration {
	if set {
		return run
	}
	return min(run, total)
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// counts writes the runs per recipe, "mutex 2, rwlock 1", in the order of
// recipes.
func counts(recipes []nemesis.Recipe, n map[string]int) string {
	var parts []string
	seen := map[string]bool{}
	for _, r := range recipes {
		if n[r.Name] > 0 && !seen[r.Name] {
			seen[r.Name] = true
			parts = append(parts, fmt.Sprintf("%s %d", r.Name, n[r.Name]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// placeholder is a build property left unexpanded in a version string
// (Debian's 3.8.0 reports "3.8.0-${mvngit.commit.id}").
var placeholder = regexp.MustCompile(`-?\$\{[^}]*\}`)

// cleanVersion is version line v without unexpanded build properties.
func cleanVersion(v string) string { return placeholder.ReplaceAllString(v, "") }

// version is the ZooKeeper version the first server that answers reports,
// without unexpanded build properties, or why none did.
func version(ctx context.Context, cl *zktest.Cluster) string {
	var errs []string
	for i := range cl.Addrs() {
		vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := cl.ServerVersion(vctx, i)
		cancel()
		if err == nil {
			return cleanVersion(v)
		}
		errs = append(errs, err.Error())
	}
	return "version unknown: " + strings.Join(errs, "; ")
}

// keepEvidence writes the history of a run with a violation to a file of
// its own in dir and keeps the servers' directories (their logs, their
// data) when they are closed. It says where both are, or why they are not.
func keepEvidence(l *launched, h *nemesis.History, dir string) string {
	var parts []string
	f, err := writeHistory(h, dir)
	if err != nil {
		parts = append(parts, "history NOT written: "+err.Error())
	} else {
		parts = append(parts, "history in "+f)
	}
	if l.keep != nil {
		if k := l.keep(); k != "" {
			parts = append(parts, k)
		}
	}
	return strings.Join(parts, "; ")
}

// writeHistory writes h to a new file in dir, named after the recipe, the
// seed and the time, so that a later run does not overwrite it.
func writeHistory(h *nemesis.History, dir string) (string, error) {
	name := fmt.Sprintf("nemesis-%s-seed%d-%s.json", h.Recipe, h.Seed, time.Now().UTC().Format("20060102T150405.000Z"))
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

// writeRun writes a run's history (history.json) and its page into dir.
func writeRun(dir string, h *nemesis.History, rep *nemesis.Report) error {
	if err := report.Write(dir, h, rep); err != nil {
		return err
	}
	f := filepath.Join(dir, "history.json")
	out, err := os.Create(f)
	if err != nil {
		return err
	}
	err = h.WriteJSON(out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", f, err)
	}
	return nil
}

// render checks the history in file again, with the rule of the recipe it
// names, and writes its page into dir.
func render(file, dir string, recipes map[string]nemesis.Recipe) error {
	in, err := os.Open(file)
	if err != nil {
		return err
	}
	defer in.Close()
	h, err := nemesis.ReadHistory(in)
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	r, ok := recipes[h.Recipe]
	if !ok {
		return fmt.Errorf("reading %s: %w: unknown recipe %q", file, nemesis.ErrBadHistory, h.Recipe)
	}
	rep := nemesis.Check(h, r.Allowed)
	if err := report.Write(dir, h, rep); err != nil {
		return err
	}
	backend := h.Backend
	if backend == "" {
		backend = "zk" // format /1: ZooKeeper's
	}
	fmt.Printf("%s %s seed %d: %s\npage: %s\n", backend, h.Recipe, h.Seed, rep.Summary(), filepath.Join(dir, report.Page))
	return nil
}

// allRecipes is every recipe of every backend by name, for -render (a
// name means the same recipe on every backend: its Allowed is what counts).
func allRecipes() map[string]nemesis.Recipe {
	all := map[string]nemesis.Recipe{}
	for _, b := range backends {
		for n, r := range b.recipes {
			all[n] = r
		}
	}
	for n, r := range neutral() {
		all[n] = r
	}
	return all
}

// firstOf is a, or b if a is empty.
func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sortedKeys lists m's keys in order.
func sortedKeys(m map[string]nemesis.Recipe) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
