package replica

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
)

// A Raft replica's directory is open in one RaftLog at a time in a
// process. A second OpenRaft of an open directory (a broker racing two
// paths to the same partition) fails before it touches a file: its
// recovery would cut, as a torn tail, what the open one is writing, and
// its close would truncate the files under it. Another process cannot
// open the directory: the node locks its data directory.

// ErrReplicaOpen is OpenRaft's error for a directory open in this process.
var ErrReplicaOpen = errors.New("replica: the directory is open in another Raft log")

// openDirs holds the directories of the open Raft logs.
var openDirs = struct {
	mu   sync.Mutex
	dirs map[string]bool
}{dirs: map[string]bool{}}

// reserveDir marks dir open and returns what unmarks it (safe to call more
// than once).
func reserveDir(dir string) (release func(), err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	openDirs.mu.Lock()
	defer openDirs.mu.Unlock()
	if openDirs.dirs[abs] {
		return nil, fmt.Errorf("%w: %s", ErrReplicaOpen, dir)
	}
	openDirs.dirs[abs] = true
	return sync.OnceFunc(func() {
		openDirs.mu.Lock()
		delete(openDirs.dirs, abs)
		openDirs.mu.Unlock()
	}), nil
}
