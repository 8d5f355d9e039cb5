//go:build unix

package httpapi

import "syscall"

// openFileLimit is the process's open-file limit (RabbitMQ's fd_total),
// 0 if it cannot be read.
func openFileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}
