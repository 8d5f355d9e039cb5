package seglog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/wharf-mq/wharf/internal/record"
)

// The two sparse indexes of a segment. Both live in memory (the lookups are
// binary searches over these slices) and are appended to the .index and
// .timeindex files, which exist only so Open need not rescan closed segments.
//
//	.index      8 bytes per entry: uint32 offset relative to the segment base, uint32 file position
//	.timeindex 12 bytes per entry: int64 timestamp, uint32 relative offset
//
// An offset entry (rel, pos) says: the batch starting at pos has base offset
// segment base + rel. One is added for the first batch written after at
// least IndexIntervalBytes of batches since the previous entry.
//
// A time entry (ts, rel) is added together with an offset entry for the same
// batch when the segment's largest timestamp so far has grown since the last
// time entry. ts is the largest timestamp of every batch BEFORE that batch, so
// "last entry with ts < target" gives a batch before which no record can have
// a timestamp >= target: the place to start scanning. (Kafka stores the
// maximum including the batch; this form avoids its off-by-one when several
// records share the target timestamp.)
const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)

type offsetEntry struct {
	rel uint32
	pos uint32
}

type timeEntry struct {
	ts  int64
	rel uint32
}

// segIndex is the in-memory index state of one segment. Guarded by Log.mu;
// entries are only ever appended, so a reader may keep using a slice header
// it copied under the lock after releasing it.
type segIndex struct {
	offsets []offsetEntry
	times   []timeEntry

	bytesSinceEntry int64 // batch bytes since (and including) the last indexed batch
	maxTs           int64 // largest batch MaxTimestamp in the segment, -1 if none
	maxTsBase       int64 // base offset of the first batch carrying maxTs, -1 if not known yet

	flushedOffsets int  // entries already written to the .index file
	flushedTimes   int  // entries already written to the .timeindex file
	unsynced       bool // the index files were written since their last fsync
}

func newSegIndex() segIndex {
	return segIndex{maxTs: -1, maxTsBase: -1}
}

// lastTimeTs is the timestamp of the last time entry, -1 if there is none.
func (x *segIndex) lastTimeTs() int64 {
	if len(x.times) == 0 {
		return -1
	}
	return x.times[len(x.times)-1].ts
}

// add accounts for a batch written at pos of a segment starting at base,
// adding index entries when they are due.
func (x *segIndex) add(base, pos int64, h batchHead, interval int64) {
	if x.bytesSinceEntry >= interval && pos > 0 {
		rel := uint32(h.baseOffset - base)
		x.offsets = append(x.offsets, offsetEntry{rel: rel, pos: uint32(pos)})
		if x.maxTs > x.lastTimeTs() {
			x.times = append(x.times, timeEntry{ts: x.maxTs, rel: rel})
		}
		x.bytesSinceEntry = 0
	}
	x.account(h)
}

// account updates the running totals for a batch without indexing it.
func (x *segIndex) account(h batchHead) {
	x.bytesSinceEntry += h.size
	if h.maxTimestamp > x.maxTs {
		x.maxTs = h.maxTimestamp
		x.maxTsBase = h.baseOffset
	}
}

// lastPos is the position of the last indexed batch, 0 if none.
func (x *segIndex) lastPos() int64 {
	if len(x.offsets) == 0 {
		return 0
	}
	return int64(x.offsets[len(x.offsets)-1].pos)
}

// posForOffset returns the position of the last indexed batch whose base
// offset is <= rel (0 if none): the batch containing rel starts there or later.
func posForOffset(offsets []offsetEntry, rel uint32) int64 {
	i := sort.Search(len(offsets), func(i int) bool { return offsets[i].rel > rel })
	if i == 0 {
		return 0
	}
	return int64(offsets[i-1].pos)
}

// boundaryAtOrBelow returns the largest indexed batch position <= pos (0 if
// none). Indexed positions are batch boundaries.
func boundaryAtOrBelow(offsets []offsetEntry, pos int64) int64 {
	i := sort.Search(len(offsets), func(i int) bool { return int64(offsets[i].pos) > pos })
	if i == 0 {
		return 0
	}
	return int64(offsets[i-1].pos)
}

// relBeforeTime returns the relative offset of the last time entry whose
// timestamp is < ts: every record before it has a smaller timestamp.
func relBeforeTime(times []timeEntry, ts int64) (uint32, bool) {
	i := sort.Search(len(times), func(i int) bool { return times[i].ts >= ts })
	if i == 0 {
		return 0, false
	}
	return times[i-1].rel, true
}

var errBadIndex = errors.New("seglog: index file inconsistent")

// decodeOffsetIndex parses and sanity-checks a .index file of a segment
// whose .log is logSize bytes long. Any inconsistency means "rebuild".
func decodeOffsetIndex(b []byte, logSize int64) ([]offsetEntry, error) {
	if len(b)%offsetEntrySize != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of entries", errBadIndex, len(b))
	}
	entries := make([]offsetEntry, 0, len(b)/offsetEntrySize)
	for i := 0; i < len(b); i += offsetEntrySize {
		e := offsetEntry{rel: binary.BigEndian.Uint32(b[i:]), pos: binary.BigEndian.Uint32(b[i+4:])}
		if int64(e.pos)+record.HeaderSize > logSize {
			return nil, fmt.Errorf("%w: position %d beyond the log (%d bytes)", errBadIndex, e.pos, logSize)
		}
		if n := len(entries); n > 0 && (e.rel <= entries[n-1].rel || e.pos <= entries[n-1].pos) {
			return nil, fmt.Errorf("%w: entry %d does not increase", errBadIndex, n)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// decodeTimeIndex parses and sanity-checks a .timeindex file.
func decodeTimeIndex(b []byte, offsets []offsetEntry) ([]timeEntry, error) {
	if len(b)%timeEntrySize != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of time entries", errBadIndex, len(b))
	}
	var lastRel uint32
	if n := len(offsets); n > 0 {
		lastRel = offsets[n-1].rel
	}
	entries := make([]timeEntry, 0, len(b)/timeEntrySize)
	for i := 0; i < len(b); i += timeEntrySize {
		e := timeEntry{ts: int64(binary.BigEndian.Uint64(b[i:])), rel: binary.BigEndian.Uint32(b[i+8:])}
		if e.rel > lastRel {
			return nil, fmt.Errorf("%w: time entry past the last offset entry", errBadIndex)
		}
		if n := len(entries); n > 0 && (e.ts <= entries[n-1].ts || e.rel <= entries[n-1].rel) {
			return nil, fmt.Errorf("%w: time entry %d does not increase", errBadIndex, n)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// pending reports whether entries wait to be written by flush.
func (x *segIndex) pending() bool {
	return len(x.offsets) > x.flushedOffsets || len(x.times) > x.flushedTimes
}

// flush appends the entries not yet in the index files.
func (x *segIndex) flush(idxFile, timeFile *os.File) error {
	if n := len(x.offsets) - x.flushedOffsets; n > 0 {
		b := make([]byte, 0, n*offsetEntrySize)
		for _, e := range x.offsets[x.flushedOffsets:] {
			b = binary.BigEndian.AppendUint32(b, e.rel)
			b = binary.BigEndian.AppendUint32(b, e.pos)
		}
		x.unsynced = true
		if _, err := idxFile.WriteAt(b, int64(x.flushedOffsets)*offsetEntrySize); err != nil {
			return err
		}
		x.flushedOffsets = len(x.offsets)
	}
	if n := len(x.times) - x.flushedTimes; n > 0 {
		b := make([]byte, 0, n*timeEntrySize)
		for _, e := range x.times[x.flushedTimes:] {
			b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
			b = binary.BigEndian.AppendUint32(b, e.rel)
		}
		x.unsynced = true
		if _, err := timeFile.WriteAt(b, int64(x.flushedTimes)*timeEntrySize); err != nil {
			return err
		}
		x.flushedTimes = len(x.times)
	}
	return nil
}

// rewrite replaces the index files' contents with the in-memory entries.
func (x *segIndex) rewrite(idxFile, timeFile *os.File) error {
	if err := idxFile.Truncate(0); err != nil {
		return err
	}
	if err := timeFile.Truncate(0); err != nil {
		return err
	}
	x.flushedOffsets, x.flushedTimes = 0, 0
	x.unsynced = true
	return x.flush(idxFile, timeFile)
}
