//go:build unix

package seglog

import "syscall"

// maxOpenFilesFromLimit gives segment files half of the process's open-file
// limit (Go raises the soft limit to the hard one at start-up), leaving the
// rest to connections, index files opened for a moment and everything else.
func maxOpenFilesFromLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return defaultMaxOpenFiles
	}
	return int(min(rl.Cur/2, 1<<20))
}

// defaultMaxOpenFiles is used when the open-file limit cannot be read.
const defaultMaxOpenFiles = 4096
