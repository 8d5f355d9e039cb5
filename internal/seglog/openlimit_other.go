//go:build !unix

package seglog

// maxOpenFilesFromLimit: without a per-process open-file limit to read,
// a fixed budget.
func maxOpenFilesFromLimit() int { return 4096 }
