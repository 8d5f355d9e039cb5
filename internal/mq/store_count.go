package mq

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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
		// Data already set aside defines no queue of its own.
		if e.IsDir() && !strings.HasSuffix(e.Name(), straySuffix) {
			n++
		}
	}
	return n, dir, err
}
