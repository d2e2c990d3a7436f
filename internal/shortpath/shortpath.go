// Package shortpath is how the module's messages and log lines show a
// path or a lock name that may be long: a znode path may be up to a packet
// long, and an error or a log line about it must stay a line long.
package shortpath

import "fmt"

// Of returns p itself, or, when it is longer than 200 bytes, its first 64
// bytes, "…" and its length.
func Of(p string) string {
	if len(p) > 200 {
		return fmt.Sprintf("%s… (%d bytes)", p[:64], len(p))
	}
	return p
}
