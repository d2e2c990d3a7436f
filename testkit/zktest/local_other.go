//go:build !unix

package zktest

import (
	"context"
	"errors"
	"os/exec"
	"time"
)

const readyTimeout = 30 * time.Second

// startLocal is not available without Unix process groups and signals.
func startLocal(context.Context, config) (*Cluster, error) {
	return nil, errors.New("local servers need a Unix system")
}

func stopSpawner() {}

// StartChild starts cmd. Outside Unix there are no process groups or
// parent-death signals: the child may outlive a crashed test binary.
func StartChild(cmd *exec.Cmd) error { return cmd.Start() }
