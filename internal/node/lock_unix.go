//go:build unix

package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFileName is the file in the data directory that one process at a time
// holds an exclusive flock(2) on, as Kafka does with each log directory's
// .lock. Two processes on one directory would both append to the same logs
// and each write clean-shutdown markers under the other. The kernel drops
// the lock when its holder exits, however it exits, so a kill -9 leaves
// nothing to clean up.
const lockFileName = ".lock"

// dirLock is a held lock on a data directory.
type dirLock struct{ f *os.File }

// lockDataDir takes the data directory's lock, or names the process that
// holds it. The holder's pid is written into the lock file for that.
func lockDataDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := lockHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("in use by another Wharf process (pid %s holds %s); stop it first, or use another data directory",
				holder, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(pid, 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write pid to %s: %w", path, err)
	}
	return &dirLock{f: f}, nil
}

// lockHolder is the pid the current holder wrote, or "unknown" if it has
// not written it yet.
func lockHolder(f *os.File) string {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	if pid := strings.TrimSpace(string(buf[:n])); pid != "" {
		return pid
	}
	return "unknown"
}

// release drops the lock (closing the file does).
func (l *dirLock) release() error { return l.f.Close() }
