package queuestore

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Store directories are created on a queue's first logged message (see
// Store). For a confirmed message to survive a crash, the directory
// entries leading to its log must be on disk too: the store's entry in the
// root directory and the messages log's entry in the store's directory.
// Sync makes them durable before a queue's first confirm.

// dirSync fsyncs one directory on behalf of many changes to it: an fsync
// covers every change announced before it started, so queues created
// together share one.
type dirSync struct {
	path    string
	changes atomic.Uint64 // changes announced so far

	mu     sync.Mutex // held during an fsync, so waiters queue behind it
	synced uint64     // changes covered by the last fsync
}

// openDirSync returns a dirSync for path, creating the directory (and
// making its entry in the parent durable) if it is missing.
func openDirSync(path string) (*dirSync, error) {
	switch _, err := os.Stat(path); {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, err
		}
		if err := syncDir(filepath.Dir(path)); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	}
	return &dirSync{path: path}, nil
}

// changed announces a change made to the directory (complete when called)
// and returns its number, for syncThrough.
func (d *dirSync) changed() uint64 { return d.changes.Add(1) }

// syncThrough returns once change n is durable, fsyncing the directory
// unless an fsync that began after it was made has already succeeded.
func (d *dirSync) syncThrough(n uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.synced >= n {
		return nil
	}
	covered := d.changes.Load()
	if err := syncDir(d.path); err != nil {
		return err
	}
	d.synced = covered
	return nil
}

// syncNewDir makes durable, once, the creation of the queue's directory
// and of its messages log's entry in it. The messages log fsyncs its own
// directory when it creates a segment.
func (s *Store) syncNewDir() error {
	if !s.newDir.Load() {
		return nil
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	if err := s.root.dir.syncThrough(s.dirChange); err != nil {
		return err
	}
	s.newDir.Store(false)
	return nil
}
