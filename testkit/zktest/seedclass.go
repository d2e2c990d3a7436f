package zktest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// seedClasses holds SeedCounters compiled once per process for each java
// and classpath (a *seedClass per java + NUL + classpath), so that each
// seeded Start runs a JVM on a class file instead of compiling the source
// file again: the source launcher compiles it in every run, about 1.2 s of
// CPU and several seconds on a busy 2-core machine, for each seeded Start.
var seedClasses sync.Map

type seedClass struct {
	once sync.Once
	dir  string // holds SeedCounters.class; "" if it could not be compiled
}

// compiledSeed returns a directory holding SeedCounters.class, compiled by
// the javac beside in.java against in.classpath, or "" when there is no
// javac there (a JRE, which seedData's source launcher then reports) or it
// failed: seedData then runs the source file, as it did before.
func compiledSeed(ctx context.Context, in install) string {
	v, _ := seedClasses.LoadOrStore(in.java+"\x00"+in.classpath, &seedClass{})
	c := v.(*seedClass)
	c.once.Do(func() { c.dir = compileSeed(ctx, in) })
	return c.dir
}

// compileSeed compiles seed/SeedCounters.java into a directory of its own
// (removed by removeSeedClasses, or by the sweep of stale directories if
// the process dies first), or returns "".
func compileSeed(ctx context.Context, in install) string {
	java, err := filepath.EvalSymlinks(in.java)
	if err != nil {
		return ""
	}
	javac := filepath.Join(filepath.Dir(java), "javac")
	if st, err := os.Stat(javac); err != nil || st.IsDir() {
		return ""
	}
	dir, err := os.MkdirTemp("", "zktest-")
	if err != nil {
		return ""
	}
	src := filepath.Join(dir, "SeedCounters.java")
	if os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644) != nil ||
		os.WriteFile(src, seedSource, 0o644) != nil {
		_ = os.RemoveAll(dir)
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, javac, "-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1", "-J-XX:-UsePerfData",
		"-encoding", "UTF-8", "-nowarn", "-proc:none", "-implicit:none", "-cp", in.classpath, "-d", dir, src)
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(dir)
		return ""
	}
	if _, err := os.Stat(filepath.Join(dir, "SeedCounters.class")); err != nil {
		_ = os.RemoveAll(dir)
		return ""
	}
	return dir
}

// removeSeedClasses removes the directories of compiledSeed, at the end of
// the tests (MainThen).
func removeSeedClasses() {
	seedClasses.Range(func(k, v any) bool {
		c := v.(*seedClass)
		c.once.Do(func() {}) // one still compiling finishes first
		if c.dir != "" {
			_ = os.RemoveAll(c.dir)
		}
		seedClasses.Delete(k)
		return true
	})
}
