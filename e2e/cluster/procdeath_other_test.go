//go:build !linux

package cluster

import "os/exec"

// dieWithTest does nothing where the kernel has no parent-death signal:
// only the test's cleanups stop the nodes there.
func dieWithTest(*exec.Cmd) {}
