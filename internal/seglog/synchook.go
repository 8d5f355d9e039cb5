package seglog

import (
	"os"
	"sync/atomic"
)

// Fault injection: the fsync observer.
//
// A power cut loses every write that no completed fsync covered. To
// simulate one honestly, a test must know for every segment file how many
// of its bytes a successful fsync covered; the log's own idea of what is
// durable (its synced offset) is what is under test, so it cannot be the
// source. SetSyncHook installs an observer that sees every successful
// fsync of a segment's .log, .index and .timeindex file, in every Log of the
// process, with a size below which every byte was written before the fsync
// started and is therefore on stable storage once it returns (bytes
// appended while it ran may or may not be). For index files that is the
// file's size just before the fsync; for a .log file it is where its data
// ended when the fsync was asked for (the file itself runs ahead of its
// data while it is the active segment, see segment.go), which is exactly
// what the log then acknowledges. e2e/reliability uses it to cut copies of
// a live data directory back to what a power cut would leave.
//
// The small offset files (recovery-point, log-start-offset, cleaner-offset)
// are not reported: they are only ever replaced whole by a rename after
// their content was fsynced, so any version of them a reader sees is a
// durable one.
//
// Unused, the hook costs one atomic pointer load per fsync and nothing on
// the append or read path. It changes nothing about how data is written.

// SyncedFile describes one successful fsync for the hook.
type SyncedFile struct {
	// Path is the name the file was opened under (a compacted segment's
	// files are opened under temporary names and renamed later; Stat's
	// inode identifies them across the rename).
	Path string
	// Stat was taken just before the fsync; its Size() bytes are durable
	// (for a .log file, Size() is the end of the data the fsync was asked
	// to cover, not the file's length).
	Stat os.FileInfo
}

// dataStat is a file's state with Size() cut to the end of its data.
type dataStat struct {
	os.FileInfo
	dataEnd int64
}

func (s dataStat) Size() int64 { return s.dataEnd }

// withSize returns before with its size cut to dataEnd when dataEnd >= 0
// lies below it.
func withSize(before os.FileInfo, dataEnd int64) os.FileInfo {
	if before == nil || dataEnd < 0 || dataEnd >= before.Size() {
		return before
	}
	return dataStat{before, dataEnd}
}

var syncHook atomic.Pointer[func(SyncedFile)]

// SetSyncHook installs fn as the fsync observer for every Log in the
// process (nil removes it) and returns a function restoring the previous
// one. fn runs on the fsyncing goroutine, possibly under a Log's lock, so
// it must not call into the Log; it may block, which stalls that fsync's
// caller exactly as a slow disk would. For tests only.
func SetSyncHook(fn func(SyncedFile)) (restore func()) {
	var p *func(SyncedFile)
	if fn != nil {
		p = &fn
	}
	prev := syncHook.Swap(p)
	return func() { syncHook.Store(prev) }
}

// statForHook returns f's state before an fsync when a hook is installed,
// nil otherwise (then it costs no system call).
func statForHook(f *os.File) os.FileInfo {
	if syncHook.Load() == nil {
		return nil
	}
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	return st
}

// reportSync tells the hook that an fsync of f, started when f was as
// described by before, succeeded.
func reportSync(f *os.File, before os.FileInfo) {
	if before == nil {
		return
	}
	if fn := syncHook.Load(); fn != nil {
		(*fn)(SyncedFile{Path: f.Name(), Stat: before})
	}
}
