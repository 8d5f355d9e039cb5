package metrics

import "syscall"

// freeDiskBytes is the space available to unprivileged users on the file
// system holding dir, or -1 if it cannot be read.
func freeDiskBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * st.Bsize
}
