package mq

import (
	"errors"
	"os"
	"path/filepath"
)

// StoredQueues counts the durable queues that have logs in dataDir, and
// names the directory holding them. The broker asks at start-up: queue
// logs with no metadata log to define their queues mean the definitions
// were lost, not that the queues are gone.
func StoredQueues(dataDir string) (n int, dir string, err error) {
	dir = filepath.Join(dataDir, queuesDirName)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, dir, nil
	}
	for _, e := range entries {
		if e.IsDir() {
			n++
		}
	}
	return n, dir, err
}
