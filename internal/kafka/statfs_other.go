//go:build !linux

package kafka

// volumeBytes is unknown off Linux.
func volumeBytes(string) (total, usable int64) { return -1, -1 }
