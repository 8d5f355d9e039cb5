//go:build !unix

package httpapi

// openFileLimit is unknown here.
func openFileLimit() uint64 { return 0 }
