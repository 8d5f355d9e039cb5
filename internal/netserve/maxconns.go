package netserve

// fallbackOpenFiles stands for the open-file limit where it cannot be read
// (seglog then budgets 4,096 segment files: half of it).
const fallbackOpenFiles = 8192

// DefaultMaxConnections is the connection cap per listener (LimitListener)
// when none is configured: an eighth of the process's open-file limit (128
// under ulimit -n 1024). Segment files may take half the limit (seglog),
// three listeners three eighths, which leaves an eighth for index and
// metadata files, directories and the listeners themselves, so a flood of
// connections cannot starve the logs of descriptors.
func DefaultMaxConnections() int {
	limit := openFileLimit()
	if limit <= 0 {
		limit = fallbackOpenFiles
	}
	return max(limit/8, 1)
}
