//go:build !linux

package metrics

// freeDiskBytes cannot be read on this platform: the metric is left out.
func freeDiskBytes(dir string) int64 { return -1 }
