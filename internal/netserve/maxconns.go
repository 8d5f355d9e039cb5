package netserve

// fallbackOpenFiles stands for the open-file limit where it cannot be read
// (seglog then budgets 4,096 segment files: half of it).
const fallbackOpenFiles = 8192

// DefaultMaxConnections is the connection cap of each of a process's
// listeners (LimitListener) when none is configured: three eighths of the
// open-file limit shared equally among them (128 each for three listeners
// under ulimit -n 1024). Segment files may take half the limit (seglog),
// which leaves an eighth for index and metadata files, directories and the
// listeners themselves, so a flood of connections, on every listener at
// once, cannot starve the logs of descriptors.
func DefaultMaxConnections(listeners int) int {
	limit := openFileLimit()
	if limit <= 0 {
		limit = fallbackOpenFiles
	}
	return max(connectionShare(limit)/max(listeners, 1), 1)
}

// connectionShare is how much of an open-file limit the listeners may
// take between them.
func connectionShare(limit int) int { return limit * 3 / 8 }
