package zookeeper

import (
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// BenchmarkDeleteFiringWatch is what the event of a session's own watch
// adds to its delete (docs/performance-hops.md#the-floor-of-the-uncontended-cycle):
// go-zookeeper creates an ephemeral sequential node, sets a watch or not
// on the same session (none; a data watch on the node; a child watch on
// its directory, the stand-in's), then deletes the node, a delete the
// server answers after the event. The metric delete-µs is the median
// delete round trip; ns/op counts the whole cycle.
func BenchmarkDeleteFiringWatch(b *testing.B) {
	cl := zktest.Shared(b)
	c := zktest.Inspect(b, cl).Conn()
	dir := cl.Chroot() + "/bench-delete-watch"
	if _, err := c.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
		b.Fatal(err)
	}
	watch := map[string]func(node string) error{
		"none":  func(string) error { return nil },
		"data":  func(node string) error { _, _, _, err := c.GetW(node); return err },
		"child": func(string) error { _, _, _, err := c.ChildrenW(dir); return err },
	}
	for _, name := range []string{"none", "data", "child"} {
		b.Run(name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				node, err := c.Create(dir+"/n-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
				if err == nil {
					err = watch[name](node)
				}
				if err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				if err := c.Delete(node, -1); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "delete-µs")
		})
	}
}
