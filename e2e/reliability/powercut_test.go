package reliability

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/wharf-mq/wharf/internal/seglog"
)

// powerCut simulates a power cut on a directory that live Logs keep
// writing to.
//
// While it watches, seglog's fsync hook tells it, for every segment file
// under root, how many bytes a completed fsync covered (the file's size
// when the fsync started). Cut then copies root twice, as a machine that
// lost power at that moment would find it:
//
//   - truncated: every segment file (.log, .index, .timeindex, and the
//     temporary names compaction uses) cut back to its durable size, 0 if
//     it was never fsynced;
//   - zeroed: the same bytes kept, the rest of the file up to the size it
//     had at the cut overwritten with zeros, as a file system that
//     extended the file but never wrote its blocks leaves it.
//
// Every other file (recovery-point, log-start-offset, producer snapshots,
// partition.metadata, markers) is copied as it is: Wharf only ever replaces
// those whole, by renaming a file it fsynced first, so whatever version is
// visible is a durable one. Directory entries are copied as they are too:
// the model drops data, not names (seglog fsyncs the directory after every
// segment it creates, so a name it relies on is durable anyway).
//
// Cut holds the lock the hook takes, so no fsync completes while it copies:
// the copy is one moment of the run, and nothing written after that moment
// can leak into it. Segment files are append-only (below their size bytes
// never change), so the durable prefix read during the copy is the one that
// was on disk at the cut. Acknowledgements are recorded through Ack under
// the same lock, so "acknowledged before the cut" is exact: an append is
// acknowledged only after its fsync was reported, hence before the cut.
type powerCut struct {
	root string

	mu      sync.Mutex
	durable map[fileID]int64 // bytes covered by the last reported fsync
	done    bool             // Cut has run: later acks are not the test's business
	syncs   int              // fsyncs reported under root

	// overcut makes Cut drop this many bytes more than a power cut may
	// from every .log file that had durable bytes: a deliberately wrong
	// cut, for the test that shows the checks notice lost data.
	overcut int64

	restore  func() // puts back the previous hook
	stopOnce sync.Once
}

// fileID names a file across renames (compaction renames segment files).
type fileID struct{ dev, ino uint64 }

func idOf(fi os.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, true
}

// startPowerCut installs the fsync hook for root; stop removes it. Only one
// powerCut may watch at a time (the hook is process-wide), so tests using
// it do not run in parallel.
func startPowerCut(t *testing.T, root string) *powerCut {
	t.Helper()
	root, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	pc := &powerCut{root: root, durable: map[fileID]int64{}}
	pc.restore = seglog.SetSyncHook(pc.onSync)
	t.Cleanup(pc.stop)
	return pc
}

// stop removes the hook; it may be called more than once.
func (pc *powerCut) stop() {
	pc.stopOnce.Do(pc.restore)
}

func (pc *powerCut) onSync(f seglog.SyncedFile) {
	if !strings.HasPrefix(f.Path, pc.root+string(filepath.Separator)) {
		return
	}
	id, ok := idOf(f.Stat)
	if !ok {
		return
	}
	// Reports can arrive out of order (a group-commit fsync that started
	// before a roll's may finish after it), and a file only grows while it
	// is watched: the largest size reported is what is durable.
	pc.mu.Lock()
	pc.durable[id] = max(pc.durable[id], f.Stat.Size())
	pc.syncs++
	pc.mu.Unlock()
}

// Ack runs record (which notes an acknowledgement) if the cut has not
// happened yet, and reports whether it ran. Call it when a client learns
// that a write was acknowledged as durable.
func (pc *powerCut) Ack(record func()) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.done {
		return false
	}
	record()
	return true
}

// cutStats says what a cut dropped.
type cutStats struct {
	files        int   // files copied
	segmentFiles int   // of which segment files
	cutFiles     int   // segment files with bytes past their durable size
	droppedBytes int64 // bytes past the durable size, over all segment files
	syncs        int   // fsyncs reported before the cut
}

func (s cutStats) String() string {
	return fmt.Sprintf("%d files (%d segment files, %d with unsynced bytes, %d bytes dropped; %d fsyncs seen)",
		s.files, s.segmentFiles, s.cutFiles, s.droppedBytes, s.syncs)
}

// Cut copies root to truncated and zeroed (see powerCut) as it is at this
// moment, and ends the acknowledgement window.
func (pc *powerCut) Cut(truncated, zeroed string) (cutStats, error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.done = true
	st := cutStats{syncs: pc.syncs}
	err := filepath.WalkDir(pc.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walk: as if removed just before the cut
			}
			return err
		}
		rel, err := filepath.Rel(pc.root, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			for _, dst := range []string{truncated, zeroed} {
				if err := os.MkdirAll(filepath.Join(dst, rel), 0o755); err != nil {
					return err
				}
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return pc.copyFile(path, filepath.Join(truncated, rel), filepath.Join(zeroed, rel), &st)
	})
	return st, err
}

// copyFile copies one file into both variants. Caller holds pc.mu.
func (pc *powerCut) copyFile(src, truncated, zeroed string, st *cutStats) error {
	f, err := os.Open(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	st.files++
	size := fi.Size()
	keep := size
	if isSegmentFile(filepath.Base(src)) {
		st.segmentFiles++
		id, _ := idOf(fi)
		keep = min(pc.durable[id], size) // never fsynced: 0
		if strings.HasSuffix(src, ".log") && keep > 0 {
			keep = max(0, keep-pc.overcut)
		}
		if keep < size {
			st.cutFiles++
			st.droppedBytes += size - keep
		}
	}
	data := make([]byte, keep)
	if _, err := io.ReadFull(f, data); err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	if err := os.WriteFile(truncated, data, 0o644); err != nil {
		return err
	}
	return os.WriteFile(zeroed, append(data, make([]byte, size-keep)...), 0o644)
}

// isSegmentFile reports whether name is one of seglog's segment files,
// including the temporary names compaction gives them.
func isSegmentFile(name string) bool {
	for _, suffix := range []string{".log", ".index", ".timeindex"} {
		if strings.HasSuffix(name, suffix) || strings.Contains(name, suffix+".") {
			return true
		}
	}
	return false
}
