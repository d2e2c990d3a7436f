package cachetest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// universe returns every relative path the suite writes for root: the
// root, a subtree three levels deep below it, and a sibling (root + "-s")
// with a child, which no cache of root may hold.
func universe(root string) []string {
	return []string{
		root, root + "/a", root + "/b", root + "/c", root + "/a/x", root + "/a/y", root + "/b/x",
		root + "/a/x/z", root + "-s", root + "-s/a",
	}
}

// inShare reports whether a cache of root in mode holds the node rel.
func inShare(root string, mode recipe.CacheMode, rel string) bool {
	if rel == root {
		return true
	}
	rest, below := strings.CutPrefix(rel, root+"/")
	switch {
	case !below || mode == recipe.CacheNode:
		return false
	case mode == recipe.CacheChildren:
		return !strings.Contains(rest, "/")
	}
	return true
}

// parent returns rel's parent ("" for a node of the base).
func parent(rel string) string {
	i := strings.LastIndex(rel, "/")
	if i < 0 {
		return ""
	}
	return rel[:i]
}

// writer is the one sequential writer of a property: it writes through the
// harness and records every state it made and which write wrote each data.
type writer struct {
	t     *testing.T
	h     Harness
	root  string
	rnd   *rand.Rand
	nodes map[string]string // rel → data, as the backend holds it now
	n     int               // writes made
	// written maps a node (rel) and a data it was given to the index of
	// the write that gave it (data is unique).
	written map[string]map[string]int
	states  []map[string]string // the states since mark, rel → data
	toRel   map[string]string   // Node.Path → rel, for the universe
}

func newWriter(t *testing.T, h Harness, root string, seed uint64) *writer {
	w := &writer{t: t, h: h, root: root, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		nodes: map[string]string{}, written: map[string]map[string]int{}, toRel: map[string]string{}}
	for _, rel := range universe(root) {
		w.toRel[h.Path(rel)] = rel
	}
	return w
}

// put writes rel with a new data, unique to this write.
func (w *writer) put(rel string) {
	w.t.Helper()
	w.n++
	d := fmt.Sprintf("d%d", w.n)
	w.h.Put(w.t, rel, []byte(d))
	w.nodes[rel] = d
	if w.written[rel] == nil {
		w.written[rel] = map[string]int{}
	}
	w.written[rel][d] = w.n
	w.record()
}

// del deletes rel.
func (w *writer) del(rel string) {
	w.t.Helper()
	w.n++
	w.h.Delete(w.t, rel)
	delete(w.nodes, rel)
	w.record()
}

// mark starts the history: its first state is the state now.
func (w *writer) mark() { w.states = []map[string]string{maps.Clone(w.nodes)} }

func (w *writer) record() {
	if w.states != nil {
		w.states = append(w.states, maps.Clone(w.nodes))
	}
}

// hasChildren reports whether rel has a child now.
func (w *writer) hasChildren(rel string) bool {
	for k := range w.nodes {
		if parent(k) == rel {
			return true
		}
	}
	return false
}

// step makes one random write the backend accepts: an update of a node,
// the creation of a node whose parent exists, or the deletion of a leaf.
func (w *writer) step() {
	w.t.Helper()
	u := universe(w.root)
	for {
		rel := u[w.rnd.IntN(len(u))]
		_, exists := w.nodes[rel]
		_, parentExists := w.nodes[parent(rel)]
		switch {
		case exists && !w.hasChildren(rel) && w.rnd.IntN(3) == 0:
			w.del(rel)
		case exists:
			w.put(rel)
		case parent(rel) == "" || parentExists:
			w.put(rel)
		default:
			continue
		}
		return
	}
}

// share returns state's part that a cache of the writer's root in mode
// holds, by Node.Path.
func (w *writer) share(state map[string]string, mode recipe.CacheMode) map[string]string {
	out := map[string]string{}
	for rel, d := range state {
		if inShare(w.root, mode, rel) {
			out[w.h.Path(rel)] = d
		}
	}
	return out
}

// shares returns the share of every state of the history.
func (w *writer) shares(mode recipe.CacheMode) []map[string]string {
	out := make([]map[string]string, len(w.states))
	for i, st := range w.states {
		out[i] = w.share(st, mode)
	}
	return out
}

// writeIndex returns the index of the write that gave the node at path
// (a Node.Path) data, or why there is none.
func (w *writer) writeIndex(path string, data []byte) (int, string) {
	rel, ok := w.toRel[path]
	if !ok {
		return 0, fmt.Sprintf("a node the suite never wrote: %q", path)
	}
	i, ok := w.written[rel][string(data)]
	if !ok {
		return 0, fmt.Sprintf("%q with data %.40q, which the suite never wrote there", path, data)
	}
	return i, ""
}

// match returns the first index from from on of states equal to content,
// or -1.
func match(states []map[string]string, content map[string]string, from int) int {
	for i := max(from, 0); i < len(states); i++ {
		if maps.Equal(states[i], content) {
			return i
		}
	}
	return -1
}

// contentOf returns a snapshot's content (Node.Path → data), or why the
// snapshot is malformed: unsorted, a path twice, a bad Created or Modified.
func contentOf(snap recipe.CacheSnapshot) (map[string]string, string) {
	out := map[string]string{}
	for i, n := range snap.Nodes {
		if i > 0 && snap.Nodes[i-1].Path >= n.Path {
			return nil, fmt.Sprintf("Nodes not sorted by Path, or a Path twice: %q before %q", snap.Nodes[i-1].Path, n.Path)
		}
		if p := nodeProblem(n); p != "" {
			return nil, p
		}
		out[n.Path] = string(n.Data)
	}
	return out, ""
}

// nodeProblem describes what is wrong with n's revisions, or returns "".
func nodeProblem(n recipe.Node) string {
	if n.Created <= 0 || n.Modified < n.Created {
		return fmt.Sprintf("node %q with Created %d, Modified %d: want 0 < Created <= Modified", n.Path, n.Created, n.Modified)
	}
	return ""
}

// show formats a content for messages, sorted.
func show(content map[string]string) string {
	keys := slices.Sorted(maps.Keys(content))
	var b strings.Builder
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%s", k, content[k])
	}
	b.WriteString("}")
	return b.String()
}
