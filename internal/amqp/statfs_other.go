//go:build !linux

package amqp

// freeDiskBytes cannot be read on this platform: the disk alarm stays off.
func freeDiskBytes(dir string) int64 { return -1 }
