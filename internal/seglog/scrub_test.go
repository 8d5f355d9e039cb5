package seglog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// cleanlyClosedLog writes count batches of 3 records with smallConfig
// (several segments) and closes the log cleanly.
func cleanlyClosedLog(t *testing.T, count int) (dir string, end int64) {
	t.Helper()
	dir = t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	end = appendBatches(t, l, count, 3, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, end
}

func TestScrubFindsFlipInClosedSegmentAfterCleanClose(t *testing.T) {
	dir, end := cleanlyClosedLog(t, 150)
	files := segmentFiles(t, dir)
	if len(files) < 3 {
		t.Fatalf("%d segments; the test needs closed ones", len(files))
	}
	path := files[1]
	positions := batchPositions(t, path)
	bad := positions[len(positions)/2]
	flipByte(t, path, bad+record.HeaderSize+3) // inside the records: only the CRC tells

	l := mustOpen(t, dir, smallConfig()) // trusted: no rescan, no error
	defer l.Close()
	if l.EndOffset() != end || l.Corruption() != nil {
		t.Fatalf("after Open: end %d (want %d), corruption %v", l.EndOffset(), end, l.Corruption())
	}
	// Before the scrub reaches it, the damaged batch is still served: the
	// window the broker keeps short by scrubbing right after start-up.
	if s, err := l.Read(l.StartOffset(), 1<<20); err != nil {
		t.Fatalf("Read before the scrub: %v", err)
	} else {
		s.Release()
	}

	_, err := l.Scrub(context.Background(), ScrubOptions{})
	ce := wantCorruption(t, err, path, bad)
	if !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("Scrub error %v does not wrap record.ErrCorrupt", err)
	}
	if !errors.Is(l.Corruption(), ce) {
		t.Errorf("Corruption() = %v, want the scrub's error", l.Corruption())
	}
	// Every read is refused, even of the healthy first segment, and appends too.
	for _, off := range []int64{0, end - 1, end} {
		if s, err := l.Read(off, 1<<20); !errors.Is(err, ce) {
			t.Errorf("Read(%d) after the scrub: %v, want the corruption", off, err)
			if s != nil {
				s.Release()
			}
		}
	}
	if _, err := l.Append(makeBatch(end, 1, 0), AppendOptions{Durable: true}); !errors.Is(err, ce) {
		t.Errorf("Append after the scrub: %v, want the corruption", err)
	}
	if _, err := l.Scrub(context.Background(), ScrubOptions{}); !errors.Is(err, ce) {
		t.Errorf("second Scrub: %v, want the same corruption", err)
	}
}

func TestScrubOfHealthyLogReadsEveryByte(t *testing.T) {
	dir, end := cleanlyClosedLog(t, 60)
	l := mustOpen(t, dir, smallConfig())
	defer l.Close()
	// Odd chunk sizes split headers and batches at chunk ends; one smaller
	// than a batch streams every batch's CRC.
	for _, chunk := range []int64{scrubChunk, 1000, 333, 50} {
		st, err := l.scrub(context.Background(), ScrubOptions{}, chunk)
		if err != nil {
			t.Fatalf("chunk %d: Scrub of a healthy log: %v", chunk, err)
		}
		if st.Bytes != l.Size() || st.Batches != 60 || st.Segments != len(segmentFiles(t, dir)) {
			t.Errorf("chunk %d: scrubbed %+v; log has %d bytes, 60 batches, %d segments", chunk, st, l.Size(), len(segmentFiles(t, dir)))
		}
	}
	if l.Corruption() != nil {
		t.Fatalf("healthy log marked corrupt: %v", l.Corruption())
	}
	if got := readAll(t, l, 1<<20); int64(len(got)) != end {
		t.Errorf("read %d records after the scrubs, want %d", len(got), end)
	}
}

func TestScrubStreamsBatchesLargerThanAChunk(t *testing.T) {
	dir, _ := cleanlyClosedLog(t, 60)
	path := segmentFiles(t, dir)[0]
	positions := batchPositions(t, path)
	bad := positions[2]
	flipByte(t, path, positions[3]-1) // the last byte of a batch

	l := mustOpen(t, dir, smallConfig())
	defer l.Close()
	_, err := l.scrub(context.Background(), ScrubOptions{}, 70) // every batch is larger
	wantCorruption(t, err, path, bad)
}

func TestScrubFindsFlippedBaseOffset(t *testing.T) {
	// The CRC does not cover the base offset: the walk must check offsets.
	dir, _ := cleanlyClosedLog(t, 60)
	path := segmentFiles(t, dir)[0]
	bad := batchPositions(t, path)[4]
	flipByte(t, path, bad+5)

	l := mustOpen(t, dir, smallConfig())
	defer l.Close()
	_, err := l.Scrub(context.Background(), ScrubOptions{})
	wantCorruption(t, err, path, bad)
}

func TestScrubSkipsWhatOpenVerifiedUnlessFull(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	appendBatches(t, l, 150, 3, 0)
	l.lastCheckpoint = time.Time{}
	if err := l.Sync(); err != nil { // recovery point: the current end
		t.Fatal(err)
	}
	appendBatches(t, l, 2, 3, 0)
	l.crash()
	files := segmentFiles(t, dir)
	flipByte(t, files[0], record.HeaderSize+3) // below the recovery point: not read at Open

	l = mustOpen(t, dir, smallConfig())
	defer l.Close()
	verified := 0
	for _, s := range l.segments {
		if s.verifiedAtOpen {
			verified++
		}
	}
	if verified == 0 || verified == len(files) {
		t.Fatalf("Open verified %d of %d segments; the test wants some of each", verified, len(files))
	}
	_, err := l.Scrub(context.Background(), ScrubOptions{})
	wantCorruption(t, err, files[0], 0)

	// A healthy log: the default scrub skips what Open verified, Full does not.
	dir, _ = cleanlyClosedLog(t, 150)
	l2 := mustOpen(t, dir, smallConfig())
	appendBatches(t, l2, 1, 3, 0)
	l2.crash()
	os.Remove(filepath.Join(dir, recoveryPointFile)) // Open verifies every segment
	l2 = mustOpen(t, dir, smallConfig())
	defer l2.Close()
	if st, err := l2.Scrub(context.Background(), ScrubOptions{}); err != nil || st.Segments != 0 {
		t.Errorf("scrub after a full recovery: %+v, %v; want nothing read", st, err)
	}
	if st, err := l2.Scrub(context.Background(), ScrubOptions{Full: true}); err != nil || st.Bytes != l2.Size() {
		t.Errorf("full scrub: %+v, %v; want all %d bytes", st, err, l2.Size())
	}
}

func TestScrubStopsWhenCancelledAndKeepsItsRate(t *testing.T) {
	dir, _ := cleanlyClosedLog(t, 150)
	l := mustOpen(t, dir, smallConfig())
	defer l.Close()
	size := l.Size()

	// Paced: the reads after the first chunk take at least their share of
	// the budget.
	const chunk = 4096
	rate := size * 4 // about a quarter of a second for the whole log
	start := time.Now()
	if _, err := l.scrub(context.Background(), ScrubOptions{BytesPerSecond: rate}, chunk); err != nil {
		t.Fatal(err)
	}
	if min := time.Duration(float64(size-chunk) / float64(rate) * float64(time.Second)); time.Since(start) < min {
		t.Errorf("scrub of %d bytes at %d B/s took %v, want at least %v", size, rate, time.Since(start), min)
	}

	// Cancelled while pacing: returns at once, nothing marked.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start = time.Now()
	_, err := l.scrub(ctx, ScrubOptions{BytesPerSecond: 1024}, chunk) // would take seconds
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled scrub: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancelled scrub returned after %v", d)
	}
	if l.Corruption() != nil {
		t.Errorf("a cancelled scrub marked the log: %v", l.Corruption())
	}
}

func TestScrubRunsAlongsideAppendsReadsAndRetention(t *testing.T) {
	dir, _ := cleanlyClosedLog(t, 60)
	cfg := smallConfig()
	cfg.RetentionBytes = 8192
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := l.Append(makeBatch(l.EndOffset(), 3, 0), AppendOptions{}); err != nil {
				t.Error(err)
				return
			}
			if _, err := l.ApplyRetention(time.Now()); err != nil {
				t.Error(err)
				return
			}
			if s, err := l.Read(l.StartOffset(), 4096); err == nil {
				s.Release()
			}
		}
	}()
	for range 5 {
		if _, err := l.scrub(context.Background(), ScrubOptions{Full: true}, 500); err != nil {
			t.Errorf("scrub alongside appends and retention: %v", err)
			break
		}
	}
	close(stop)
	wg.Wait()
}
