package seglog

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// packageMaxOpenFiles is the segment-file limit every test of the package
// runs under: so small that reads, appends, compaction, scrubbing and
// recovery all go through files the cache closed and reopens.
const packageMaxOpenFiles = 3

func TestMain(m *testing.M) {
	SetMaxOpenFiles(packageMaxOpenFiles)
	os.Exit(m.Run())
}

// withMaxOpenFiles runs the rest of the test under limit n.
func withMaxOpenFiles(t *testing.T, n int) {
	prev := SetMaxOpenFiles(n)
	t.Cleanup(func() { SetMaxOpenFiles(prev) })
}

// openDescriptors counts the process's open descriptors naming a file
// under dir.
func openDescriptors(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && len(target) > len(dir) && target[:len(dir)+1] == dir+"/" {
			n++
		}
	}
	return n
}

// TestManyLogsStayWithinTheFileLimit: 200 logs of several segments each,
// written, synced and read back, hold no more descriptors than the limit
// once idle, and every record still reads back after the files were closed
// and reopened behind the logs' backs.
func TestManyLogsStayWithinTheFileLimit(t *testing.T) {
	const logs, limit = 200, 16
	withMaxOpenFiles(t, limit)
	root := t.TempDir()
	var all []*Log
	for i := range logs {
		l := mustOpen(t, filepath.Join(root, fmt.Sprint(i)), smallConfig())
		defer l.Close()
		appendBatches(t, l, 30, 3, 0) // several 4 KiB segments
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		all = append(all, l)
	}
	if got := OpenFiles(); got > limit {
		t.Fatalf("%d segment files open after the writes, limit %d", got, limit)
	}
	if got := openDescriptors(t, root); got > limit {
		t.Fatalf("%d descriptors open under the data directory, limit %d", got, limit)
	}
	for _, l := range all {
		if got := len(readAll(t, l, 1<<20)); got != 90 {
			t.Fatalf("%s: read %d records, want 90", l.Dir(), got)
		}
	}
	if got := openDescriptors(t, root); got > limit {
		t.Fatalf("%d descriptors open after reading everything, limit %d", got, limit)
	}
}

// TestReopeningLogsStaysWithinTheFileLimit: Open reads every segment
// it recovers, but keeps no more of them open than the limit.
func TestReopeningLogsStaysWithinTheFileLimit(t *testing.T) {
	root := t.TempDir()
	for i := range 20 {
		l := mustOpen(t, filepath.Join(root, fmt.Sprint(i)), smallConfig())
		appendBatches(t, l, 30, 3, 0)
		if i%2 == 0 {
			l.crash() // the next Open verifies every batch after the recovery point
		} else if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	withMaxOpenFiles(t, 2)
	var logs []*Log
	for i := range 20 {
		l := mustOpen(t, filepath.Join(root, fmt.Sprint(i)), smallConfig())
		defer l.Close()
		logs = append(logs, l)
	}
	if got := openDescriptors(t, root); got > 2 {
		t.Fatalf("%d descriptors after opening 20 logs under a limit of 2", got)
	}
	for _, l := range logs {
		if got := len(readAll(t, l, 1<<20)); got != 90 {
			t.Fatalf("read %d records, want 90", got)
		}
	}
}

// TestUnsyncedSegmentIsSyncedBeforeClosing: to make room for another
// file, the cache closes a segment with writes no fsync has covered only
// after fsyncing it through the descriptor the writes went through.
func TestUnsyncedSegmentIsSyncedBeforeClosing(t *testing.T) {
	withMaxOpenFiles(t, 1)
	root := t.TempDir()
	a := mustOpen(t, filepath.Join(root, "a"), DefaultConfig())
	defer a.Close()
	b := mustOpen(t, filepath.Join(root, "b"), DefaultConfig())
	defer b.Close()
	appendBatches(t, a, 1, 1, 0) // not durable: a's file is dirty
	aLog := segmentPath(a.Dir(), 0, logSuffix)
	var synced []string
	restore := SetSyncHook(func(f SyncedFile) { synced = append(synced, f.Path) })
	appendBatches(t, b, 1, 1, 0) // needs a's slot
	restore()
	if len(synced) != 1 || synced[0] != aLog {
		t.Fatalf("fsyncs while b took a's slot: %q, want just %s", synced, aLog)
	}
	if got := OpenFiles(); got != 1 {
		t.Fatalf("%d files open, want 1", got)
	}
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := len(readAll(t, a, 1<<20)); got != 1 {
		t.Fatalf("read %d records from a, want 1", got)
	}
}

// TestBurstOfWritesToManyLogsStaysWithinTheLimit: unsynced writes to more
// logs than the limit, as one produce request to thousands of partitions
// makes, cost fsyncs but no more descriptors than the limit.
func TestBurstOfWritesToManyLogsStaysWithinTheLimit(t *testing.T) {
	const logs, limit = 100, 8
	withMaxOpenFiles(t, limit)
	root := t.TempDir()
	var all []*Log
	for i := range logs {
		l := mustOpen(t, filepath.Join(root, fmt.Sprint(i)), DefaultConfig())
		defer l.Close()
		all = append(all, l)
	}
	for _, l := range all {
		appendBatches(t, l, 1, 1, 0)
		if got := openDescriptors(t, root); got > limit {
			t.Fatalf("%d descriptors open during the burst, limit %d", got, limit)
		}
	}
	for _, l := range all {
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		if got := len(readAll(t, l, 1<<20)); got != 1 {
			t.Fatalf("read %d records, want 1", got)
		}
	}
}

// TestSlicePinsItsFiles: a Slice keeps its files open whatever the limit,
// and they are closed again once it is released.
func TestSlicePinsItsFiles(t *testing.T) {
	withMaxOpenFiles(t, 1)
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	defer l.Close()
	appendBatches(t, l, 150, 3, 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	s, err := l.Read(0, 1<<20) // spans every segment
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Chunks) < 3 {
		t.Fatalf("slice covers %d segments, want several", len(s.Chunks))
	}
	if got := OpenFiles(); got < len(s.Chunks) {
		t.Fatalf("%d files open while a slice holds %d", got, len(s.Chunks))
	}
	if _, err := s.Bytes(); err != nil {
		t.Fatal(err)
	}
	s.Release()
	appendBatches(t, l, 1, 1, 0) // the next pin lets the cache shed the rest
	if got := OpenFiles(); got != 1 {
		t.Fatalf("%d files open after Release, want 1", got)
	}
}
