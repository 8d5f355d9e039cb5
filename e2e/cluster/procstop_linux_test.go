package cluster

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// allThreadsStopped reports whether every thread of process pid is
// stopped (state T in /proc/<pid>/task/*/stat). kill(2) returns once
// SIGSTOP is queued: the process stops only when one of its threads is
// next scheduled and takes the signal, and on a loaded machine the others
// may read, propose and answer requests for milliseconds until then.
func allThreadsStopped(pid int) (bool, error) {
	stats, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
	if err != nil || len(stats) == 0 {
		return false, errors.Join(err, fs.ErrNotExist)
	}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a thread that ended since the listing
		}
		if err != nil {
			return false, err
		}
		// "pid (comm) S ...": comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, errors.New("unexpected " + path + ": " + string(b))
		}
		if state := b[i+2]; state != 'T' && state != 't' {
			return false, nil
		}
	}
	return true, nil
}
