//go:build unix

package serverkit

import "os/exec"

// StartChild starts cmd (which must not be started yet), a test server's
// process: in its own process group and, on Linux, forked from a thread
// that lives as long as the test binary, with a parent-death signal
// (SIGKILL), so that the child dies with the binary even if the binary
// crashes or is killed. Every harness starts its servers with it.
// cmd.SysProcAttr is replaced, except its Credential (a harness that runs
// its server as another user, as pgtest runs PostgreSQL as postgres under
// root, keeps it). The test binary's TestMain must end with Main, MainThen
// or Run, which stop that thread after the tests.
func StartChild(cmd *exec.Cmd) error {
	attr := childAttr()
	if cmd.SysProcAttr != nil {
		attr.Credential = cmd.SysProcAttr.Credential
	}
	cmd.SysProcAttr = attr
	return spawn(cmd)
}
