//go:build unix

package netserve

import "syscall"

// openFileLimit is the process's open-file limit (Go raises the soft limit
// to the hard one at start-up), or 0 if it cannot be read.
func openFileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return int(min(rl.Cur, 1<<30))
}
