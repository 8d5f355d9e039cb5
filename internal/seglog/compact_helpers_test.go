package seglog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/wharf-mq/wharf/internal/record"
)

// kv is one keyed record of a compaction test. A nil value is a tombstone,
// a nil key a record without key.
type kv struct {
	key, value []byte
}

func put(k, v string) kv    { return kv{key: []byte(k), value: []byte(v)} }
func tombstone(k string) kv { return kv{key: []byte(k)} }

// keyedLog tracks what a test appended: every record by offset, and each
// key's latest offset.
type keyedLog struct {
	t        testing.TB
	l        *Log
	byOffset map[int64]kv
	latest   map[string]int64
}

func newKeyedLog(t testing.TB, l *Log) *keyedLog {
	return &keyedLog{t: t, l: l, byOffset: map[int64]kv{}, latest: map[string]int64{}}
}

// append writes one batch of kvs with timestamp ts for all of them.
func (m *keyedLog) append(ts int64, kvs ...kv) {
	m.t.Helper()
	m.appendBatch(keyedBatch(ts, kvs), kvs)
}

// appendBatch writes batch, which holds kvs, and returns its base offset.
func (m *keyedLog) appendBatch(batch []byte, kvs []kv) int64 {
	m.t.Helper()
	res, err := m.l.Append(batch, AppendOptions{})
	if err != nil {
		m.t.Fatalf("Append: %v", err)
	}
	for i, r := range kvs {
		off := res.BaseOffset + int64(i)
		m.byOffset[off] = r
		if r.key != nil {
			m.latest[string(r.key)] = off
		}
	}
	return res.BaseOffset
}

// keyedBatch is a batch of kvs with timestamp ts for all of them.
func keyedBatch(ts int64, kvs []kv) []byte {
	recs := make([]record.Record, len(kvs))
	for i, r := range kvs {
		recs[i] = record.Record{Key: r.key, Value: r.value}
	}
	return record.NewBatch(ts, recs)
}

// producerBatch is keyedBatch as producer id of an idempotent producer
// (epoch 0) writes it from sequence seq, inside a transaction if
// transactional.
func producerBatch(ts, id int64, seq int32, transactional bool, kvs ...kv) []byte {
	b := keyedBatch(ts, kvs)
	be := binary.BigEndian
	if transactional {
		be.PutUint16(b[batchOffAttributes:], be.Uint16(b[batchOffAttributes:])|attrTransactional)
	}
	be.PutUint64(b[batchOffProducerID:], uint64(id))
	be.PutUint16(b[batchOffProducerEpoch:], 0)
	be.PutUint32(b[batchOffBaseSequence:], uint32(seq))
	be.PutUint32(b[batchOffCRC:], crc32.Checksum(b[batchOffAttributes:], crc32c))
	return b
}

// live is the key/value state the appended records describe.
func (m *keyedLog) live() map[string]string {
	out := map[string]string{}
	for k, off := range m.latest {
		if v := m.byOffset[off].value; v != nil {
			out[k] = string(v)
		}
	}
	return out
}

type keyedRecord struct {
	offset int64
	kv
}

// readKeyed reads the whole log from its start offset, maxBytes at a time,
// checking that offsets strictly increase and that every record is the one
// appended at its offset.
func (m *keyedLog) readKeyed(maxBytes int64) []keyedRecord {
	m.t.Helper()
	var out []keyedRecord
	next, lastSeen := m.l.StartOffset(), int64(-1)
	for next < m.l.EndOffset() {
		s, err := m.l.Read(next, maxBytes)
		if err != nil {
			m.t.Fatalf("Read(%d): %v", next, err)
		}
		b, err := s.Bytes()
		s.Release()
		if err != nil {
			m.t.Fatal(err)
		}
		if len(b) == 0 {
			m.t.Fatalf("Read(%d) returned nothing below end %d", next, m.l.EndOffset())
		}
		for len(b) > 0 {
			h, err := record.Verify(b)
			if err != nil {
				m.t.Fatalf("Read(%d): bad batch: %v", next, err)
			}
			recs, err := record.Records(b[:h.Size()])
			if err != nil {
				m.t.Fatalf("Read(%d): %v", next, err)
			}
			if h.LastOffset() < next {
				m.t.Fatalf("Read(%d) returned a batch ending at %d", next, h.LastOffset())
			}
			for _, r := range recs {
				off := h.BaseOffset + int64(r.OffsetDelta)
				if off < next {
					continue
				}
				if off <= lastSeen {
					m.t.Fatalf("offset %d after %d", off, lastSeen)
				}
				lastSeen = off
				want, ok := m.byOffset[off]
				if !ok || !bytes.Equal(want.key, r.Key) || !bytes.Equal(want.value, r.Value) || (want.value == nil) != (r.Value == nil) {
					m.t.Fatalf("offset %d holds %q=%q, appended %q=%q", off, r.Key, r.Value, want.key, want.value)
				}
				out = append(out, keyedRecord{offset: off, kv: kv{key: r.Key, value: r.Value}})
			}
			next = max(next, h.LastOffset()+1)
			b = b[h.Size():]
		}
	}
	return out
}

// replay applies records in order to a key/value state.
func replay(recs []keyedRecord) map[string]string {
	out := map[string]string{}
	for _, r := range recs {
		switch {
		case r.key == nil:
			// not part of a key/value state
		case r.value == nil:
			delete(out, string(r.key))
		default:
			out[string(r.key)] = string(r.value)
		}
	}
	return out
}

func sameState(t testing.TB, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("state has %d keys, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("key %q = %q, want %q", k, got[k], v)
		}
	}
}

// activeBase is the base offset of the active segment.
func activeBase(l *Log) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.activeLocked().base
}

// checkSegmentsOrdered checks that segments hold increasing, disjoint
// offset ranges (compaction may leave gaps between them) and that only the
// active one may be empty.
func checkSegmentsOrdered(t testing.TB, l *Log) {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	for i, s := range l.segments {
		if s.size == 0 && i != len(l.segments)-1 {
			t.Fatalf("closed segment %d is empty", s.base)
		}
		if i > 0 && l.segments[i-1].next > s.base {
			t.Fatalf("segment %d ends at %d, next starts at %d", l.segments[i-1].base, l.segments[i-1].next, s.base)
		}
	}
}

// dirFiles maps every file name in dir to its contents.
func dirFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func filesWithSuffix(t testing.TB, dir, suffix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

func key(i int) string { return fmt.Sprintf("key-%03d", i) }
