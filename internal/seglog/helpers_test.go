package seglog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/wharf-mq/wharf/internal/record"
)

// testLogger discards output unless -v is given.
func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// smallConfig rolls every few batches and indexes densely, so tests cover
// several segments and many index entries with little data.
func smallConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 256
	return cfg
}

func mustOpen(t testing.TB, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(dir, cfg, testLogger(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// crash drops the log as a killed process would: no sync, no recovery
// point, no clean-shutdown marker.
func (l *Log) crash() {
	l.mu.Lock()
	l.closed = true
	for l.committing {
		l.syncDone.Wait()
	}
	segs := l.segments
	l.segments = nil
	l.syncDone.Broadcast()
	l.mu.Unlock()
	for _, s := range segs {
		s.release()
	}
}

// value is the payload of record i of a test log.
func value(i int64) []byte { return []byte(fmt.Sprintf("record-%06d", i)) }

// makeBatch builds a batch of n records whose values are value(first..),
// with timestamps ts, ts+1, ...
func makeBatch(first int64, n int, ts int64) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{TimestampDelta: int64(i), Value: value(first + int64(i))}
	}
	return record.NewBatch(ts, recs)
}

// appendBatches appends count batches of n records each (timestamps from
// ts0, one per record) and returns the log end offset.
func appendBatches(t testing.TB, l *Log, count, n int, ts0 int64) int64 {
	t.Helper()
	for i := 0; i < count; i++ {
		first := l.EndOffset()
		res, err := l.Append(makeBatch(first, n, ts0+first), AppendOptions{})
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		if res.BaseOffset != first || res.LastOffset != first+int64(n)-1 {
			t.Fatalf("Append at %d: got %+v", first, res)
		}
	}
	return l.EndOffset()
}

type readRecord struct {
	offset, ts int64
	value      []byte
}

// decodeAll splits b into batches (each must verify) and returns their records.
func decodeAll(t testing.TB, b []byte) []readRecord {
	t.Helper()
	var out []readRecord
	for len(b) > 0 {
		h, err := record.Verify(b)
		if err != nil {
			t.Fatalf("slice holds a bad batch: %v", err)
		}
		recs, err := record.Records(b[:h.Size()])
		if err != nil {
			t.Fatalf("Records: %v", err)
		}
		for _, r := range recs {
			ts := h.BaseTimestamp + r.TimestampDelta
			if h.LogAppendTime() {
				ts = h.MaxTimestamp
			}
			out = append(out, readRecord{offset: h.BaseOffset + int64(r.OffsetDelta), ts: ts, value: r.Value})
		}
		b = b[h.Size():]
	}
	return out
}

// readAll reads the log from its start to its end in maxBytes steps and
// checks that offsets are consecutive and values are value(offset).
func readAll(t testing.TB, l *Log, maxBytes int64) []readRecord {
	t.Helper()
	var all []readRecord
	next := l.StartOffset()
	for next < l.EndOffset() {
		s, err := l.Read(next, maxBytes)
		if err != nil {
			t.Fatalf("Read(%d): %v", next, err)
		}
		b, err := s.Bytes()
		s.Release()
		if err != nil {
			t.Fatalf("Bytes: %v", err)
		}
		recs := decodeAll(t, b)
		if len(recs) == 0 {
			t.Fatalf("Read(%d) returned nothing below end %d", next, l.EndOffset())
		}
		for _, r := range recs {
			if r.offset < next {
				continue // the batch started before the offset asked for
			}
			if r.offset != next {
				t.Fatalf("offset %d, want %d", r.offset, next)
			}
			if !bytes.Equal(r.value, value(r.offset)) {
				t.Fatalf("offset %d holds %q", r.offset, r.value)
			}
			all = append(all, r)
			next++
		}
	}
	return all
}

func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// batchPositions returns the start position of every batch in a segment
// file, stopping at preallocated zeros a crashed log left after its data.
func batchPositions(t testing.TB, path string) []int64 {
	positions, _ := batchLayout(t, path)
	return positions
}

// segmentDataEnd returns where the last batch of a segment file ends: its length
// without the preallocated zeros a crashed log left.
func segmentDataEnd(t testing.TB, path string) int64 {
	_, end := batchLayout(t, path)
	return end
}

func batchLayout(t testing.TB, path string) (positions []int64, dataEnd int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pos := 0
	for pos < len(b) && !allZero(b[pos:]) {
		h, err := record.ParseHeader(b[pos:])
		if err != nil {
			t.Fatalf("%s:%d: %v", path, pos, err)
		}
		positions = append(positions, int64(pos))
		pos += h.Size()
	}
	return positions, int64(pos)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// flipBit inverts the lowest bit of one byte of a file.
func flipBit(t testing.TB, path string, pos int64) {
	t.Helper()
	xorByte(t, path, pos, 0x01)
}

// flipByte inverts one byte of a file.
func flipByte(t testing.TB, path string, pos int64) {
	t.Helper()
	xorByte(t, path, pos, 0xff)
}

func xorByte(t testing.TB, path string, pos int64, mask byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= mask
	if _, err := f.WriteAt(b, pos); err != nil {
		t.Fatal(err)
	}
}

func wantCorruption(t testing.TB, err error, file string, pos int64) *CorruptionError {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("want *CorruptionError, got %v", err)
	}
	if ce.File != file || ce.Pos != pos {
		t.Fatalf("corruption reported at %s:%d, want %s:%d (%v)", ce.File, ce.Pos, file, pos, err)
	}
	if want := fmt.Sprintf("corrupt record batch at %s:%d: ", file, pos); len(ce.Error()) < len(want) || ce.Error()[:len(want)] != want {
		t.Fatalf("Error() = %q, want prefix %q", ce.Error(), want)
	}
	return ce
}

// waitDurableNow is WaitDurable for whatever the log holds below upTo now.
func (l *Log) waitDurableNow(upTo int64) error {
	return l.WaitDurable(context.Background(), upTo, l.Truncations())
}
