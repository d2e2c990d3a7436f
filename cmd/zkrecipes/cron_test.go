package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// crontab is one ```crontab block of a document.
type crontab struct {
	doc  string            // the document, e.g. "README.md"
	env  map[string]string // its NAME=value lines
	jobs []string          // the commands of its schedule lines (after the five time fields)
}

// scheduleLine is a crontab schedule line: five time fields, then the
// command, kept as written.
var scheduleLine = regexp.MustCompile(`^(?:\S+\s+){5}(\S.*)$`)

// readCrontabs returns the ```crontab blocks of the document at path
// (relative to this module), failing the test if it has none.
func readCrontabs(t *testing.T, path string) []crontab {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tabs []crontab
	rest := string(b)
	for {
		var block string
		var ok bool
		if _, rest, ok = strings.Cut(rest, "```crontab\n"); !ok {
			break
		}
		if block, rest, ok = strings.Cut(rest, "```\n"); !ok {
			t.Fatalf("%s: a ```crontab block is not closed", path)
		}
		tab := crontab{doc: filepath.Base(path), env: map[string]string{}}
		for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
			if m := scheduleLine.FindStringSubmatch(l); m != nil && !strings.Contains(strings.Fields(l)[0], "=") {
				tab.jobs = append(tab.jobs, m[1])
			} else if name, val, ok := strings.Cut(l, "="); ok {
				tab.env[name] = val
			} else {
				t.Fatalf("%s: crontab line %q is neither NAME=value nor a schedule line", path, l)
			}
		}
		tabs = append(tabs, tab)
	}
	if len(tabs) == 0 {
		t.Fatalf("%s has no ```crontab block", path)
	}
	return tabs
}

// TestCrontabLines runs every crontab line of README.md and docs/cli.md as
// cron would (sh -c, in a HOME holding go/bin/zkrecipes and ./nightly.sh,
// cron's PATH), read from the documents so that they cannot drift: the
// schedule line's command verbatim; the environment lines with the test's
// servers in place of the example's hosts (a ZooKeeper chroot is kept).
// One run holds the lock and runs the job; a second run is refused (75)
// without running it; neither writes a byte, so cron mails nothing. And
// both documents give the same line: one answer for cron.
func TestCrontabLines(t *testing.T) {
	t.Parallel()
	tabs := append(readCrontabs(t, "../../README.md"), readCrontabs(t, "../../docs/cli.md")...)
	for _, tab := range tabs {
		if len(tab.jobs) != 1 || tab.jobs[0] != tabs[0].jobs[0] {
			t.Errorf("%s's crontab lines %q differ from %s's %q", tab.doc, tab.jobs, tabs[0].doc, tabs[0].jobs)
		}
	}
	for i, tab := range tabs {
		t.Run(strings.TrimSuffix(tab.doc, ".md")+"-"+string(rune('0'+i)), func(t *testing.T) {
			t.Parallel()
			env := []string{"PATH=/usr/bin:/bin", "SHELL=/bin/sh"} // cron's, besides HOME
			for name, val := range tab.env {
				if name == "ZK_SERVERS" {
					val = testServers(t, val)
				}
				env = append(env, name+"="+val)
			}
			for _, job := range tab.jobs {
				runCronJob(t, env, job)
			}
		})
	}
}

// testServers returns the test's servers for the ZK_SERVERS value of a
// document: a lock service of the same backend.
func testServers(t *testing.T, example string) string {
	t.Helper()
	scheme, _, ok := strings.Cut(example, "://")
	if !ok { // ZooKeeper: host:port,...[/chroot]
		chroot := ""
		if i := strings.Index(example, "/"); i >= 0 {
			chroot = example[i:]
		}
		return strings.Join(zktest.Shared(t).Servers(), ",") + chroot
	}
	names := map[string]string{"etcd": "etcd", "postgres": "PostgreSQL", "redis": "Redis"}
	for _, ls := range lockServers {
		if ls.name == names[scheme] {
			url, addr := ls.start(t)
			return url(addr)
		}
	}
	t.Fatalf("no test server for a crontab's ZK_SERVERS scheme %q", scheme)
	return ""
}

// cronJob is one run of a crontab command.
type cronJob struct {
	out  *syncBuffer // stdout and stderr: what cron would mail
	done chan struct{}
	code int
}

// startCronJob runs job as cron does: sh -c, in home, with env and HOME.
func startCronJob(t *testing.T, home string, env []string, job string) *cronJob {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", job)
	cmd.Dir = home
	cmd.Env = append(append([]string(nil), env...), "HOME="+home)
	j := &cronJob{out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = j.out, j.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			j.code = ee.ExitCode()
		} else if err != nil {
			j.code = -1
		}
		close(j.done)
	}()
	t.Cleanup(func() {
		select {
		case <-j.done:
		default:
			cmd.Process.Kill()
			<-j.done
		}
	})
	return j
}

// expect waits (30 s at most) for the job to exit with want, having
// written nothing.
func (j *cronJob) expect(t *testing.T, what string, want int) {
	t.Helper()
	select {
	case <-j.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still running after 30 s; output:\n%s", what, j.out)
	}
	if j.code != want || j.out.String() != "" {
		t.Errorf("%s: exit %d, want %d; output (cron would mail it):\n%s", what, j.code, want, j.out)
	}
}

// runCronJob runs job twice at once on a fresh HOME whose nightly.sh
// records its token and waits for a gate: the first run holds the lock, the
// second is refused while it does.
func runCronJob(t *testing.T, env []string, job string) {
	t.Helper()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "go", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(home, "go", "bin", "zkrecipes")); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"$ZKRECIPES_TOKEN\" >> ran\nwhile [ ! -e gate ]; do sleep 0.05; done\n"
	if err := os.WriteFile(filepath.Join(home, "nightly.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(home, "ran")
	holder := startCronJob(t, home, env, job)
	deadline := time.Now().Add(30 * time.Second)
	for len(readLines(t, ran)) == 0 {
		select {
		case <-holder.done:
			t.Fatalf("the first run exited %d without running the job:\n%s", holder.code, holder.out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first run did not start the job within 30 s:\n%s", holder.out)
		}
	}
	startCronJob(t, home, env, job).expect(t, "the run refused while the job runs elsewhere", exitHeld)
	touch(t, filepath.Join(home, "gate"))
	holder.expect(t, "the run that held the lock", 0)
	if lines := readLines(t, ran); len(lines) != 1 || lines[0] == "" {
		t.Errorf("the job ran with tokens %q, want once with a token", lines)
	}
}

// TestUsageCrontabLine: the crontab example of `zkrecipes --help` is
// README's schedule line, so that the three places give one answer.
func TestUsageCrontabLine(t *testing.T) {
	t.Parallel()
	readme := readCrontabs(t, "../../README.md")[0].jobs[0]
	var got []string
	for _, l := range strings.Split(mainUsage, "\n") {
		if m := scheduleLine.FindStringSubmatch(strings.TrimSpace(l)); m != nil && strings.HasPrefix(strings.TrimSpace(l), "0 3 ") {
			got = append(got, m[1])
		}
	}
	if len(got) != 1 || got[0] != readme {
		t.Errorf("zkrecipes --help's crontab lines %q, want README's %q", got, readme)
	}
}
