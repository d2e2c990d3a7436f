package fencesql_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// docRaiseScript returns the psql raise of docs/backends.md's "Switching
// backends", step 3, as printed (less the list item's indent, as a reader
// copies it from the page).
func docRaiseScript(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/backends.md")
	if err != nil {
		t.Fatal(err)
	}
	const indent, start = "   ", "```sh\n   psql \"$DATABASE_URL\""
	_, rest, ok := strings.Cut(string(doc), start)
	block, _, ok2 := strings.Cut(rest, indent+"```\n")
	if !ok || !ok2 {
		t.Fatal("docs/backends.md has no ```sh block starting with psql \"$DATABASE_URL\" in a list item")
	}
	lines := strings.Split(indent+"psql \"$DATABASE_URL\""+block, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, indent)
	}
	return strings.Join(lines, "\n")
}

// TestBackendsDocPsqlRaise runs docs/backends.md's psql raise to era 1:
// it raises the shell job's fence row and every row's fence column of
// jobs to era 1's floor, after which Do and Update refuse the old era's
// token and accept era 1's; run again it lowers nothing.
func TestBackendsDocPsqlRaise(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		t.Fatalf("no psql (%v): %s", err, pgtest.InstallHint)
	}
	ctx := ctxT(t)
	dsn := pgtest.Shared(t).Database(t)
	db := openPostgresDSN(t, dsn)
	f := newFence(t, db)
	mustExec(t, db, "CREATE TABLE public.jobs (id BIGINT PRIMARY KEY, state TEXT, fence BIGINT NOT NULL DEFAULT 0)",
		"INSERT INTO public.jobs (id, state, fence) VALUES (1, 'a', 40), (2, 'b', 0)")
	if err := f.Do(ctx, "nightly-report", 40, nil); err != nil {
		t.Fatal(err)
	}
	script := docRaiseScript(t)
	run := func() {
		t.Helper()
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the docs' psql raise: %v: %s\n%s", err, out, script)
		}
	}
	run()
	floor := fence.Era(1).Floor()
	if high, err := f.Highest(ctx, "nightly-report"); err != nil || high != floor {
		t.Fatalf("the fence row after the raise: %v, %v; want %v", high, err, floor)
	}
	if n := count(t, db, "SELECT id FROM public.jobs WHERE fence = $1", int64(floor)); n != 2 {
		t.Fatalf("%d rows of jobs at the floor, want 2", n)
	}
	if err := f.Do(ctx, "nightly-report", 40, nil); !errors.Is(err, fence.ErrStale) {
		t.Errorf("Do with the old era's token: %v", err)
	}
	first, _ := fence.Era(1).Token(1)
	for _, id := range []int{1, 2} {
		row := fencesql.Row{Table: "public.jobs", Key: "id", ID: id}
		if err := f.Update(ctx, db, 40, row, "state = $1", "OLD-ERA"); !errors.Is(err, fence.ErrStale) {
			t.Errorf("row %d: Update with the old era's token: %v", id, err)
		}
		if err := f.Update(ctx, db, first, row, "state = $1", "new"); err != nil {
			t.Errorf("row %d: the new era's first token: %v", id, err)
		}
	}
	if err := f.Do(ctx, "nightly-report", first, nil); err != nil {
		t.Fatal(err)
	}
	run() // again: nothing lowered
	if high, err := f.Highest(ctx, "nightly-report"); err != nil || high != first {
		t.Fatalf("the fence row after a second raise: %v, %v; want %v", high, err, first)
	}
	if n := count(t, db, "SELECT id FROM public.jobs WHERE fence = $1", int64(first)); n != 2 {
		t.Fatalf("%d rows of jobs kept at era 1's token, want 2", n)
	}
}
