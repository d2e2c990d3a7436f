package zktest

import (
	"fmt"
	"sync"
)

var (
	exampleMu    sync.Mutex
	exampleViews []*Cluster
)

// ExampleServers is for runnable Example functions, which have no
// testing.TB: it returns the connect list of the Shared server seen through a
// fresh chroot of its own (the chroot suffix is on the last element). The
// chroots are deleted, and the server stopped, by Main. It panics with
// InstallHint when no server can be provided (an example must not pass
// without a server).
func ExampleServers() []string {
	base, err := sharedBase()
	if err != nil {
		panic(fmt.Sprintf("zktest.ExampleServers: %v", err))
	}
	c, err := base.chrootView("example")
	if err != nil {
		panic(fmt.Sprintf("zktest.ExampleServers: %v", err))
	}
	exampleMu.Lock()
	exampleViews = append(exampleViews, c)
	exampleMu.Unlock()
	return c.Servers()
}

// closeExampleViews deletes the chroots handed out by ExampleServers.
func closeExampleViews() error {
	exampleMu.Lock()
	views := exampleViews
	exampleViews = nil
	exampleMu.Unlock()
	var first error
	for _, c := range views {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
