package broker

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// Idempotent producers (KIP-98). Each partition remembers, per producer id,
// the epoch and the sequence ranges of its last few batches, so a retried
// batch is answered with its original offset instead of being written
// twice, a gap in sequence numbers is refused, and a producer with a stale
// epoch is fenced. The state is derived from the log (every batch carries
// its producer id, epoch and base sequence) and snapshotted beside it so a
// restart replays only what was written after the snapshot.

// producerBatchesKept is how many recent batches per producer are
// remembered: Kafka's bound on in-flight requests of an idempotent producer.
const producerBatchesKept = 5

// defaultProducerIDExpirationMs is Kafka's producer.id.expiration.ms (a
// day), which Wharf does not let one configure. A producer is forgotten
// once its last batch's timestamp is that old, as in Kafka: the time
// comes from the log, so a replica that rebuilds the table (at restart,
// on becoming leader) forgets the producers the leader forgot, where
// taking the time of the rebuild would give every replayed producer
// another day.
const defaultProducerIDExpirationMs = 86400000

type producerBatch struct {
	FirstSeq    int32 `json:"first_seq"`
	LastSeq     int32 `json:"last_seq"`
	FirstOffset int64 `json:"first_offset"`
}

type producerEntry struct {
	Epoch   int16           `json:"epoch"`
	Batches []producerBatch `json:"batches"` // oldest first
	// LastTimestamp is the max timestamp of the producer's last batch or
	// marker (batchTimestamp), what expiry counts from; Kafka's
	// lastTimestamp. Snapshots written before it was the batch's time hold
	// the broker's time of the append under the same name.
	LastTimestamp int64 `json:"last_append_ms"`
}

// producerStates is one partition's producer table. The partition's
// produceMu guards it.
type producerStates struct {
	byID map[int64]*producerEntry
}

func newProducerStates() *producerStates {
	return &producerStates{byID: map[int64]*producerEntry{}}
}

// lastSequence is the sequence number of a batch's last record; sequences
// wrap from MaxInt32 to 0 as Kafka's do.
func lastSequence(h record.Header) int32 {
	return addSequence(h.BaseSequence, h.LastOffsetDelta)
}

func addSequence(seq, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}

// check decides what to do with an idempotent batch: append it (nil, nil),
// answer it as a duplicate of an earlier batch (that batch, nil), or refuse
// it.
func (s *producerStates) check(h record.Header) (*producerBatch, error) {
	e := s.byID[h.ProducerID]
	switch {
	case e == nil:
		// A producer this partition holds no state for (expired, or its
		// batches gone with retention) starts again at whatever sequence
		// its batch carries, as Kafka 2.5+ accepts it (KIP-360): refusing
		// it would fail a producer whose clock is a day behind, whose
		// batches expire as they are written.
		return nil, nil
	case h.ProducerEpoch < e.Epoch:
		return nil, fmt.Errorf("%w: producer %d epoch %d is older than %d",
			ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.Epoch)
	case h.ProducerEpoch > e.Epoch:
		if h.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: producer %d's new epoch %d must start at sequence 0, not %d",
				ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return nil, nil
	}
	last := lastSequence(h)
	for i := range e.Batches {
		if b := &e.Batches[i]; b.FirstSeq == h.BaseSequence && b.LastSeq == last {
			return b, nil
		}
	}
	if n := len(e.Batches); n > 0 {
		if want := addSequence(e.Batches[n-1].LastSeq, 1); h.BaseSequence != want {
			return nil, fmt.Errorf("%w: producer %d sent sequence %d, expected %d",
				ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence, want)
		}
	}
	return nil, nil
}

// record notes a batch written at firstOffset with max timestamp tsMs.
func (s *producerStates) record(h record.Header, firstOffset, tsMs int64) {
	e := s.byID[h.ProducerID]
	if e == nil || h.ProducerEpoch != e.Epoch {
		e = &producerEntry{Epoch: h.ProducerEpoch}
		s.byID[h.ProducerID] = e
	}
	if len(e.Batches) == producerBatchesKept {
		e.Batches = append(e.Batches[:0], e.Batches[1:]...)
	}
	e.Batches = append(e.Batches, producerBatch{FirstSeq: h.BaseSequence, LastSeq: lastSequence(h), FirstOffset: firstOffset})
	e.LastTimestamp = tsMs
}

// batchTimestamp is the time a batch counts for its producer, as Kafka
// takes it: its max timestamp as stored, the producer's clock, or on a
// LogAppendTime topic the leader's stamp (logAppendTime > 0 while it is
// appended; in the log the stamp is the max timestamp,
// record.SetLogAppendTime). A timestamp in the future is taken as it is,
// as Kafka does (message.timestamp.after.max.ms is unbounded by default):
// the producer is kept until a day after it.
func batchTimestamp(h record.Header, logAppendTime int64) int64 {
	if logAppendTime > 0 {
		return logAppendTime
	}
	return h.MaxTimestamp
}

// expire forgets producers whose last batch is older than cutoffMs,
// except those with a transaction open in txns: Kafka never expires
// those, whose marker still has to fence the producer's old epoch.
func (s *producerStates) expire(cutoffMs int64, txns *txnTable) {
	for id, e := range s.byID {
		if _, open := txns.ongoing[id]; !open && e.LastTimestamp < cutoffMs {
			delete(s.byID, id)
		}
	}
}

// replay feeds every idempotent batch in data (whole batches) to the
// table, and every transactional batch and marker to txns, each at its
// own timestamp.
func (s *producerStates) replay(data []byte, txns *txnTable) (next int64, err error) {
	next = -1
	for len(data) > 0 {
		h, err := record.ParseHeader(data)
		if err != nil {
			return next, err
		}
		switch {
		case h.ProducerID < 0:
		case h.Control():
			commit, err := controlIsCommit(data[:h.Size()])
			if err != nil {
				return next, err
			}
			s.noteEpoch(h.ProducerID, h.ProducerEpoch, batchTimestamp(h, 0))
			txns.end(h.ProducerID, h.BaseOffset, commit)
		case h.BaseSequence == noSequence:
			// The broker's own transactional writes carry no sequence.
			s.noteEpoch(h.ProducerID, h.ProducerEpoch, batchTimestamp(h, 0))
			if h.Transactional() {
				txns.begin(h.ProducerID, h.BaseOffset)
			}
		default:
			s.record(h, h.BaseOffset, batchTimestamp(h, 0))
			if h.Transactional() {
				txns.begin(h.ProducerID, h.BaseOffset)
			}
		}
		next = h.LastOffset() + 1
		data = data[h.Size():]
	}
	return next, nil
}

// producerSnapshot is the file form of a partition's producer table.
type producerSnapshot struct {
	// Offset is the log end offset the table covers: replay starts there.
	Offset    int64                    `json:"offset"`
	Producers map[int64]*producerEntry `json:"producers"`
	// Ongoing and Aborted are the partition's transactions (txn_state.go).
	Ongoing map[int64]int64 `json:"ongoing,omitempty"`
	Aborted []AbortedTxn    `json:"aborted,omitempty"`
}

const producerSnapshotFile = "producer-state.snapshot"

func writeProducerSnapshot(dir string, snap producerSnapshot) error {
	data, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, producerSnapshotFile+".tmp")
	if err := writeFileSync(tmp, data); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, producerSnapshotFile))
}

func readProducerSnapshot(dir string) (producerSnapshot, bool) {
	data, err := os.ReadFile(filepath.Join(dir, producerSnapshotFile))
	if err != nil {
		return producerSnapshot{}, false
	}
	var snap producerSnapshot
	if json.Unmarshal(data, &snap) != nil || snap.Producers == nil {
		return producerSnapshot{}, false
	}
	return snap, true
}

// loadProducers rebuilds the partition's producer table: from its snapshot
// when that matches the log, then by replaying the batches written since.
// The producers expired by then are forgotten at once (Kafka leaves them
// out of a snapshot it loads), so every replica that rebuilds the table
// serves the same producers. The transactions rebuilt with it are swapped
// in under txnMu at the end: a new leader rebuilds while read_committed
// fetches read the last stable offset (LastStableOffset). Caller holds
// produceMu, or is opening the partition.
func (p *Partition) loadProducers() error {
	producers, txns := newProducerStates(), newTxnTable()
	snapshotAt := p.producerSnapshot
	from, end := p.log.StartOffset(), p.log.HighWatermark() // the end, on a single node
	// A replica's snapshot may be a follower's, whose table Raft did not
	// keep: replicas replay their whole log.
	if snap, ok := readProducerSnapshot(p.dir); ok && p.raft == nil && snap.Offset >= from && snap.Offset <= end {
		producers.byID = snap.Producers
		if snap.Ongoing != nil {
			txns.ongoing = snap.Ongoing
		}
		txns.aborted = snap.Aborted
		from = snap.Offset
		snapshotAt = snap.Offset
	}
	for from < end {
		slice, err := p.log.Read(from, 4<<20)
		if err != nil {
			return err
		}
		data, err := slice.Bytes()
		slice.Release()
		if err != nil {
			return err
		}
		next, err := producers.replay(data, &txns)
		if err != nil {
			return err
		}
		if next <= from {
			return fmt.Errorf("replaying producer state: no progress at offset %d", from)
		}
		from = next
	}
	producers.expire(time.Now().UnixMilli()-defaultProducerIDExpirationMs, &txns)
	p.producers, p.producerSnapshot = producers, snapshotAt
	p.txnMu.Lock()
	p.txns = txns
	p.txnMu.Unlock()
	return nil
}

// maintainProducers forgets expired producers and verifications, and
// snapshots the table if the log grew since the last snapshot.
func (p *Partition) maintainProducers(now time.Time) error {
	p.produceMu.Lock()
	defer p.produceMu.Unlock()
	cutoff := now.UnixMilli() - defaultProducerIDExpirationMs
	end := p.log.EndOffset()
	p.txnMu.Lock()
	p.producers.expire(cutoff, &p.txns)
	p.txns.expireVerifications(cutoff)
	p.txns.trim(p.log.StartOffset())
	snap := producerSnapshot{Offset: end, Producers: p.producers.byID,
		Ongoing: maps.Clone(p.txns.ongoing), Aborted: slices.Clone(p.txns.aborted)}
	p.txnMu.Unlock()
	if end == p.producerSnapshot {
		return nil
	}
	if err := writeProducerSnapshot(p.dir, snap); err != nil {
		return err
	}
	p.producerSnapshot = end
	return nil
}
