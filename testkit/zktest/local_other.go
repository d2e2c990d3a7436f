//go:build !unix

package zktest

import (
	"context"
	"errors"
	"time"
)

const readyTimeout = 30 * time.Second

// startLocal is not available without Unix process groups and signals.
func startLocal(context.Context, config) (*Cluster, error) {
	return nil, errors.New("local servers need a Unix system")
}
