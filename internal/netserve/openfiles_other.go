//go:build !unix

package netserve

// openFileLimit: without a per-process open-file limit to read, 0.
func openFileLimit() int { return 0 }
