package kafka

import "syscall"

// volumeBytes is the total and available size of the filesystem holding
// dir, or -1, -1 if it cannot be read.
func volumeBytes(dir string) (total, usable int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize
}
