package zktest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// seedSource is the program that writes the seeded snapshot: see
// seed/SeedCounters.java.
//
//go:embed seed/SeedCounters.java
var seedSource []byte

// JDKHint tells a person how to get what WithSeqCounters needs besides a
// ZooKeeper server: a JDK, whose jdk.compiler module runs the seeding
// program from its source (a JRE alone cannot).
const JDKHint = "install a JDK: sudo apt-get install -y default-jdk-headless " +
	"(or set JAVA_HOME to a JDK; a JRE lacks the jdk.compiler module that runs Java source files)"

// WithSeqCounters starts the servers on data that already holds the given
// directories with the given child-change counters, so that tests can reach
// the end of ZooKeeper's sequential-node numbering without creating two
// billion children. Each key is an absolute server path ("/" is allowed,
// /zookeeper is not) of a plain persistent znode with open ACLs and no data,
// created with its missing parents; its value, from 0 to math.MaxInt32, is
// the suffix the next sequential create in that directory gets: the count
// of creates the server keeps as the parent's cversion. That is not the
// Cversion a client reads in the directory's Stat, which counts deletes too:
// servers report int32(2*counter - NumChildren). A directory that is also
// the parent of other keys counts their creation, so its value must be at
// least their number.
//
// Before the servers start, zktest writes a snapshot with ZooKeeper's own
// classes (DataTree, FileTxnSnapLog) from the jars the servers run, with
// the same java, by running the Java source file seed/SeedCounters.java
// (kept in this package), compiled once per test process by the javac
// beside that java (or else with Java's single-file source launcher). That
// needs a JDK (JDKHint) and adds a JVM run to Start (about 0.5 s on a busy
// 2-core machine, plus the compilation once). Only zktest's local servers can be seeded, standalone
// or an ensemble (every server starts from the same snapshot): with
// ZK_TEST_SERVERS set, Start and Launch fail with an error wrapping
// ErrUnsupported, and the container provider is not tried. Invalid paths
// or counters fail Start and Launch too.
//
// What ZooKeeper 3.8.0 (Debian 12) and 3.9.3 (Debian 13) were measured to
// do, alike, with a directory seeded at math.MaxInt32-3 (TestSeqCounters):
// sequential creates get the suffixes 2147483644 to 2147483647; the
// counter then stays at 2147483647 (each create's increment overflows, and
// the server only ever raises the stored counter), also across restarts.
// Every later sequential create there gets 2147483647 again: one whose
// name is taken ("n-" again) fails with NodeExists, one with a new prefix
// succeeds with that suffix. The creates of one multi see the overflowed
// counter of the ones before them: 2147483647, -2147483648, -2147483647.
// So do pipelined creates that the server prepares while an earlier one is
// in flight (timing decides which do). Each create that succeeds at the
// limit also counts a digest mismatch (zk_digest_mismatches_count in mntr;
// the first is an ERROR in the server log), and the parent's pzxid stops
// moving. Deleting a child does not change the counter. ZooKeeper 3.4
// wrapped to negative suffixes instead.
//
// Paths are checked as ZooKeeper checks them (valid UTF-8, none of the
// characters it refuses) and passed to Java as UTF-8, whatever the locale.
// An empty map seeds nothing (the servers start empty, and an external
// ensemble is used as usual); several WithSeqCounters options merge, the
// last one's counter winning for a path named twice.
func WithSeqCounters(counters map[string]int32) Option {
	cp := make(map[string]int32, len(counters))
	for k, v := range counters {
		cp[k] = v
	}
	return func(c *config) {
		if c.seqCounters == nil {
			c.seqCounters = make(map[string]int32, len(cp))
		}
		for k, v := range cp {
			c.seqCounters[k] = v
		}
	}
}

// checkSeqCounters reports the first invalid key or value of counters.
func checkSeqCounters(counters map[string]int32) error {
	for _, p := range slices.Sorted(maps.Keys(counters)) {
		if v := counters[p]; v < 0 {
			return fmt.Errorf("zktest: WithSeqCounters: %q: counter %d is negative", p, v)
		}
		if err := checkServerPath(p); err != nil {
			return fmt.Errorf("zktest: WithSeqCounters: %w", err)
		}
	}
	return nil
}

// checkServerPath accepts an absolute znode path outside /zookeeper.
func checkServerPath(p string) error {
	if p == "/" {
		return nil
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return fmt.Errorf("%q: not an absolute znode path (a leading and no trailing /)", p)
	}
	for _, el := range strings.Split(p[1:], "/") {
		switch {
		case el == "":
			return fmt.Errorf("%q: empty path element", p)
		case el == "." || el == "..":
			return fmt.Errorf("%q: relative path element %q", p, el)
		case strings.ContainsRune(el, 0):
			return fmt.Errorf("%q: NUL in path", p)
		}
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("%q: not valid UTF-8", p)
	}
	for _, r := range p {
		// ZooKeeper's PathUtils.validatePath, on Java's UTF-16 units: a
		// rune above U+FFFF is a surrogate pair there.
		if r <= 0x1f || (r >= 0x7f && r <= 0x9f) || (r >= 0xd800 && r <= 0xf8ff) || r >= 0xfff0 {
			return fmt.Errorf("%q: contains %U, a character ZooKeeper refuses", p, r)
		}
	}
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return fmt.Errorf("%q: /zookeeper is the server's own", p)
	}
	return nil
}

// errSeedUnsupported is the error of providers that cannot seed data.
func errSeedUnsupported(what string) error {
	return fmt.Errorf("zktest: WithSeqCounters needs zktest's local servers, whose data it writes before they start; %s cannot be seeded: %w", what, ErrUnsupported)
}

// seedError marks a failure to seed the data, after which no other
// provider is tried.
type seedError struct{ err error }

func (e seedError) Error() string { return e.err.Error() }
func (e seedError) Unwrap() error { return e.err }

// errSeed matches every seedError (errors.Is).
var errSeed = errors.New("zktest: seeding failed")

func (e seedError) Is(target error) bool { return target == errSeed }

// seedData writes a snapshot holding counters with in's java and
// classpath. It returns a directory (to be removed by the caller) whose
// version-2 folder is to be copied into each server's data directory.
func seedData(ctx context.Context, cfg config, in install) (string, error) {
	start := time.Now()
	dir, err := os.MkdirTemp("", "zktest-")
	if err != nil {
		return "", err
	}
	fail := func(err error) (string, error) {
		_ = os.RemoveAll(dir)
		return "", seedError{fmt.Errorf("zktest: WithSeqCounters: seeding the data directory: %w", err)}
	}
	// The sweep of stale directories removes it if this process dies first.
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fail(err)
	}
	src := filepath.Join(dir, "SeedCounters.java")
	if err := os.WriteFile(src, seedSource, 0o644); err != nil {
		return fail(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		return fail(err)
	}
	args := []string{
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"-Djava.awt.headless=true",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", in.classpath, src, data,
	}
	if classes := compiledSeed(ctx, in); classes != "" {
		args[len(args)-3] = in.classpath + string(os.PathListSeparator) + classes
		args[len(args)-2] = "SeedCounters"
	}
	for _, p := range slices.Sorted(maps.Keys(cfg.seqCounters)) {
		args = append(args, hex.EncodeToString([]byte(p))+"="+strconv.FormatInt(int64(cfg.seqCounters[p]), 10))
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, in.java, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if strings.Contains(msg, "jdk.compiler") {
			// Java's source launcher needs the compiler module, which only a
			// JDK has.
			return fail(fmt.Errorf("%w: %s: %s cannot run Java source files (%v: %s)", ErrNoServer, JDKHint, in.java, err, msg))
		}
		return fail(fmt.Errorf("%s %s: %v: %s", in.java, filepath.Base(src), err, msg))
	}
	snaps, _ := filepath.Glob(filepath.Join(data, "version-2", "snapshot.*"))
	if len(snaps) != 1 {
		return fail(fmt.Errorf("want one snapshot in %s, found %d; output: %s", data, len(snaps), out.String()))
	}
	cfg.logger.Info("zktest: seeded a snapshot", "counters", len(cfg.seqCounters), "file", filepath.Base(snaps[0]), "took", time.Since(start))
	return dir, nil
}

// copySeed copies the seeded version-2 folder of seedDir into dataDir.
func copySeed(seedDir, dataDir string) error {
	from := filepath.Join(seedDir, "data", "version-2")
	to := filepath.Join(dataDir, "version-2")
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			return errors.New("zktest: unexpected " + filepath.Join(from, e.Name()))
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
