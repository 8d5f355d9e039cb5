package cluster

import (
	"os/exec"
	"syscall"
)

// dieWithTest has the kernel kill cmd's process when the test process
// dies without running its cleanups (a -timeout panic, a SIGKILL), so a
// failed run leaves no broker behind. (The signal is tied to the thread
// that started the process; Go ends a thread only when a goroutine
// locked to it exits, which nothing here does.)
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
