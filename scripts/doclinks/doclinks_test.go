package doclinks

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// root is the repository's root, relative to this package.
const root = "../.."

var (
	// mdLink is an inline Markdown link or image: [text](target).
	mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	// goRef is a document named in Go source: docs/x.md or docs/x.md#fragment.
	goRef = regexp.MustCompile(`docs/[A-Za-z0-9_./-]+\.md(#[A-Za-z0-9_-]+)?`)
	// inlineCode is a code span, whose text is not a link.
	inlineCode = regexp.MustCompile("`[^`]*`")
)

// TestMarkdownLinks checks every relative link of every Markdown file.
func TestMarkdownLinks(t *testing.T) {
	for _, doc := range markdownFiles(t) {
		for _, l := range links(t, doc) {
			if msg := resolve(t, doc, l.target); msg != "" {
				t.Errorf("%s:%d: link %s: %s", rel(doc), l.line, l.target, msg)
			}
		}
	}
}

// TestGoReferences checks every docs/*.md path and fragment named in a Go file.
func TestGoReferences(t *testing.T) {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "doclinks") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, ref := range goRef.FindAllString(line, -1) {
				ref = strings.TrimSuffix(ref, ".") // a sentence's full stop
				if msg := resolve(t, filepath.Join(root, "go.mod"), ref); msg != "" {
					t.Errorf("%s:%d: %s: %s", rel(path), i+1, ref, msg)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// markdownFiles returns README.md, CHANGELOG.md (when present) and every
// Markdown file under docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, f := range []string{"README.md", "CHANGELOG.md"} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			files = append(files, filepath.Join(root, f))
		}
	}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found only %q: is root %q the repository?", files, root)
	}
	return files
}

// link is one link of a document.
type link struct {
	line   int
	target string
}

// links returns the links of the Markdown file at path, outside code
// blocks and code spans.
func links(t *testing.T, path string) []link {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []link
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			out = append(out, link{n, m[1]})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// resolve checks target (path, path#fragment or #fragment) named in the
// file from and returns what is wrong with it, or "".
func resolve(t *testing.T, from, target string) string {
	t.Helper()
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, frag, _ := strings.Cut(target, "#")
	file := from
	if path != "" {
		file = filepath.Join(filepath.Dir(from), path)
	}
	st, err := os.Stat(file)
	if err != nil {
		return "no such file"
	}
	if frag == "" {
		return ""
	}
	if st.IsDir() || !strings.HasSuffix(file, ".md") {
		return "a fragment of a file that is not Markdown"
	}
	if !anchors(t, file)[frag] {
		return "no heading with the anchor #" + frag
	}
	return ""
}

// anchorCache holds the anchors of each document read.
var anchorCache = map[string]map[string]bool{}

// anchors returns the anchors of the headings of the Markdown file at path,
// as GitHub makes them: lower case, only letters, digits, spaces, '-' and
// '_' kept, spaces made '-', a repeated anchor suffixed -1, -2, ...
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	if a, ok := anchorCache[path]; ok {
		return a
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			a[id+"-"+strconv.Itoa(n)] = true
		} else {
			a[id] = true
		}
		seen[id]++
	}
	anchorCache[path] = a
	return a
}

// rel returns path relative to the repository's root.
func rel(path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return r
	}
	return path
}
