package replica

import (
	"sync"
	"testing"
	"time"
)

// TestStateFileFlushDuringSync: a state file takes writes while a sync
// round fsyncs it (the host's loop writes every group's appends then),
// and what it took stays to be made durable by the next sync.
func TestStateFileFlushDuringSync(t *testing.T) {
	sf, _, err := openStateFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer sf.close()
	sf.add(recHardState, uint64(1), uint64(0), uint64(1))
	if err := sf.flush(); err != nil {
		t.Fatal(err)
	}
	fsynced, release := make(chan int64, 2), make(chan struct{})
	var once, released sync.Once
	releaseSync := func() { released.Do(func() { close(release) }) }
	defer releaseSync() // before the file closes, also when the test fails
	hook := func(path string, size int64) {
		if path != sf.path {
			return
		}
		fsynced <- size
		once.Do(func() { <-release }) // the first sync stays in progress
	}
	stateSyncHook.Store(&hook)
	defer stateSyncHook.Store(nil)

	synced := make(chan error, 1)
	go func() { synced <- sf.sync() }()
	first := <-fsynced
	flushed := make(chan error, 1)
	go func() {
		sf.add(recHardState, uint64(2), uint64(0), uint64(2))
		flushed <- sf.flush()
	}()
	select {
	case err := <-flushed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a flush waited for the sync in progress")
	}
	releaseSync()
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if err := sf.sync(); err != nil {
		t.Fatal(err)
	}
	if second := <-fsynced; second <= first {
		t.Fatalf("the second sync made %d bytes durable, no more than the first's %d", second, first)
	}
}
