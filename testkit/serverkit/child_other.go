//go:build !unix

package serverkit

import "os/exec"

func stopSpawner() {}

// StartChild starts cmd. Outside Unix there are no process groups or
// parent-death signals: the child may outlive a crashed test binary.
func StartChild(cmd *exec.Cmd) error { return cmd.Start() }
