//go:build !linux

package pgtest

import "errors"

var errNoProc = errors.New("pgtest: Pause needs Linux's /proc")

func stopAndWait(int) error       { return errNoProc }
func children(int) ([]int, error) { return nil, errNoProc }
