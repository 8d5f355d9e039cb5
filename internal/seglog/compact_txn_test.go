package seglog

import (
	"testing"
)

// transactionalBatch is a batch of a transactional producer, as a client
// inside a transaction writes it.
func transactionalBatch(ts int64, kvs ...kv) []byte {
	return producerBatch(ts, 99, 0, true, kvs...)
}

// The log does not know whether a transaction committed or aborted, so a
// transactional record must neither shadow an older value of its key (an
// aborted one would delete committed data) nor be removed itself.
func TestCompactLeavesTransactionalRecordsAlone(t *testing.T) {
	l := mustOpen(t, t.TempDir(), compactConfig())
	defer l.Close()
	m := newKeyedLog(t, l)
	m.append(testTs0, put("offset", "committed-41"))
	txnAt := l.EndOffset()
	if _, err := l.Append(transactionalBatch(testTs0, put("offset", "aborted-99")), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	m.byOffset[txnAt] = put("offset", "aborted-99") // not in m.latest: it must not count as newest
	// Enough later, unrelated data that both batches sit in closed
	// segments and the dirty ratio calls for a pass.
	for i := 0; len(segmentBases(l)) < 6; i++ {
		m.append(testTs0+1, put(key(i%5), "filler"))
	}
	mustCompact(t, l, withinRetained)

	var committed, transactional bool
	for _, r := range m.readKeyed(everything) {
		switch {
		case string(r.key) == "offset" && string(r.value) == "committed-41":
			committed = true
		case r.offset == txnAt && string(r.value) == "aborted-99":
			transactional = true
		}
	}
	if !committed {
		t.Errorf("the committed value was removed, shadowed by a transactional record")
	}
	if !transactional {
		t.Errorf("the transactional record at %d was removed by the cleaner", txnAt)
	}
}
