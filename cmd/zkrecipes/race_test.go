//go:build race

package main

// raceEnabled: the tests build the binary with -race too.
const raceEnabled = true
