// Command publish writes the repository's modules (its working tree) into
// a directory that GOPROXY=file://<dir> serves, and prints the version it
// published them at: releasetest.Publish. Run it from the repository's
// root, as scripts/modules.sh proxy does:
//
//	go run ./testkit/releasetest/publish DIR [VERSION]
//
// docs/releasing.md ("Trying it before a release") says how a service uses
// the directory.
package main

import (
	"fmt"
	"os"

	"github.com/zkrecipes/zkrecipes/testkit/releasetest"
)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		fmt.Fprintln(os.Stderr, "usage: publish DIR [VERSION]  (from the repository's root)")
		os.Exit(2)
	}
	version := ""
	if len(os.Args) == 3 {
		version = os.Args[2]
	}
	v, err := releasetest.Publish(".", os.Args[1], version)
	if err != nil {
		fmt.Fprintln(os.Stderr, "publish:", err)
		os.Exit(1)
	}
	fmt.Println(v)
}
