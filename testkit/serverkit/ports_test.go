package serverkit

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestFreePortsReserved: a port FreePorts returned is not returned again,
// here or in another process, until ReleasePorts.
func TestFreePortsReserved(t *testing.T) {
	if p := os.Getenv("SERVERKIT_TRY_RESERVE"); p != "" {
		n, _ := strconv.Atoi(p)
		os.Stdout.WriteString(strconv.FormatBool(reserve(n)) + "\n")
		return
	}
	if lockDir() == "" {
		t.Fatal("no lock directory under the user's cache directory: set HOME or XDG_CACHE_HOME")
	}
	ports, err := FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ReleasePorts(ports...) })
	if reserve(ports[0]) {
		t.Fatalf("port %d reserved twice in one process", ports[0])
	}
	other := func() string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFreePortsReserved$")
		cmd.Env = append(os.Environ(), "SERVERKIT_TRY_RESERVE="+strconv.Itoa(ports[1]))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child: %v", err)
		}
		return strings.Fields(string(out))[0]
	}
	if got := other(); got != "false" {
		t.Fatalf("another process reserved held port %d: %s", ports[1], got)
	}
	ReleasePorts(ports[1])
	if got := other(); got != "true" {
		t.Fatalf("another process could not reserve released port %d: %s", ports[1], got)
	}
	if !reserve(ports[1]) {
		t.Fatalf("released port %d not reservable again", ports[1])
	}
	for _, n := range []int{-1, MaxPorts + 1} {
		if _, err := FreePorts(n); !errors.Is(err, ErrPortCount) {
			t.Errorf("FreePorts(%d) = %v, want ErrPortCount", n, err)
		}
	}
	if p, err := FreePorts(0); err != nil || len(p) != 0 {
		t.Errorf("FreePorts(0) = %v, %v", p, err)
	}
}
