package broker

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Transactions (KIP-98) as one partition sees them. A transactional
// producer's batches carry the transactional attribute; the transaction
// coordinator later appends a control batch (a COMMIT or ABORT marker) for
// the producer. Between the two the transaction is ongoing here, and
// read_committed consumers may read only below the last stable offset: the
// first offset of the oldest ongoing transaction. Aborted transactions are
// listed (producer id, first offset, marker offset) so that a fetch can
// tell consumers which batches to drop.
//
// Both are derived from the log, like the producer table, and carried in
// the same snapshot.

// AbortedTxn is one aborted transaction of a partition.
type AbortedTxn struct {
	ProducerID  int64 `json:"producer_id"`
	FirstOffset int64 `json:"first_offset"`
	// LastOffset is the offset of the ABORT marker.
	LastOffset int64 `json:"last_offset"`
}

// txnTable is the partition's transaction state; the partition's txnMu
// guards it (writers also hold produceMu, which orders them with appends).
type txnTable struct {
	ongoing map[int64]int64 // producer id → first offset of its open transaction
	aborted []AbortedTxn    // in marker order
	// verifying holds the verifications started for producers with no
	// transaction open here (TxnGuard), until the producer's next
	// transactional batch or marker. A leader's state only: a rebuilt
	// table starts without any.
	verifying map[int64]verification
}

// verification is a TxnGuard the partition handed out: its id, when
// (expired as producers are), and the lowest first sequence of the
// batches verified with it (Kafka's VerificationStateEntry): a batch
// after that one may not go in first, where a producer unknown here
// would have it taken at any sequence (producerStates.check).
type verification struct {
	id        uint64
	startMs   int64
	lowestSeq int32
}

func newTxnTable() txnTable { return txnTable{ongoing: map[int64]int64{}} }

// begin notes a transactional batch at offset; only the first batch of a
// transaction sets its first offset. The producer's verification is
// spent: the transaction is open here now.
func (t *txnTable) begin(producerID, offset int64) {
	if _, ok := t.ongoing[producerID]; !ok {
		t.ongoing[producerID] = offset
	}
	delete(t.verifying, producerID)
}

// end closes the producer's transaction at the marker's offset. A
// verification started before the marker no longer admits a batch.
func (t *txnTable) end(producerID, markerOffset int64, commit bool) {
	delete(t.verifying, producerID)
	first, ok := t.ongoing[producerID]
	if !ok {
		return // nothing of the transaction was written here
	}
	delete(t.ongoing, producerID)
	if !commit {
		t.aborted = append(t.aborted, AbortedTxn{ProducerID: producerID, FirstOffset: first, LastOffset: markerOffset})
	}
}

// firstUnstable is the first offset of the oldest ongoing transaction.
func (t *txnTable) firstUnstable() (int64, bool) {
	first, found := int64(0), false
	for _, off := range t.ongoing {
		if !found || off < first {
			first, found = off, true
		}
	}
	return first, found
}

// txnGuardIDs numbers the verifications of every partition: an id is
// never handed out twice, so a guard cannot match a later verification of
// the same producer (Kafka's VerificationGuard counter).
var txnGuardIDs atomic.Uint64

// startVerification is StartTxnVerification on the table.
func (t *txnTable) startVerification(producerID int64, firstSeq int32, nowMs int64) TxnGuard {
	if _, ok := t.ongoing[producerID]; ok {
		return TxnGuard{}
	}
	v, ok := t.verifying[producerID]
	if !ok {
		// Verifications of one producer's batches in flight together
		// share one, as in Kafka: the first append spends it, and the
		// others find the transaction open.
		v = verification{id: txnGuardIDs.Add(1), startMs: nowMs, lowestSeq: firstSeq}
		if t.verifying == nil {
			t.verifying = map[int64]verification{}
		}
	}
	v.lowestSeq = min(v.lowestSeq, firstSeq)
	t.verifying[producerID] = v
	return TxnGuard{id: v.id}
}

// admit decides whether a transactional batch of the producer starting at
// firstSeq, verified with g, may be appended: yes if the producer has a
// transaction open here; else g must be the verification still pending
// for it, no marker and no other batch of the producer having been
// written since it started (ErrInvalidTxnState), and the batch the
// first of those verified with it (ErrOutOfOrderSequence: its retry
// comes after the earlier one's).
func (t *txnTable) admit(producerID int64, g TxnGuard, firstSeq int32) error {
	if _, ok := t.ongoing[producerID]; ok {
		return nil
	}
	switch v, ok := t.verifying[producerID]; {
	case !ok || g.id == 0 || v.id != g.id:
		return fmt.Errorf("%w: producer %d's transaction ended here after its batch was verified", ErrInvalidTxnState, producerID)
	case firstSeq > v.lowestSeq:
		return fmt.Errorf("%w: producer %d's batch at sequence %d came before the one at %d verified with it",
			ErrOutOfOrderSequence, producerID, firstSeq, v.lowestSeq)
	}
	return nil
}

// expireVerifications forgets verifications started before cutoffMs
// whose batch never came (refused, or the producer went away).
func (t *txnTable) expireVerifications(cutoffMs int64) {
	maps.DeleteFunc(t.verifying, func(_ int64, v verification) bool { return v.startMs < cutoffMs })
}

// trim forgets aborted transactions wholly below the log start.
func (t *txnTable) trim(logStart int64) {
	t.aborted = slices.DeleteFunc(t.aborted, func(a AbortedTxn) bool { return a.LastOffset < logStart })
}

// Control record key types (Kafka's ControlRecordType).
const (
	controlAbort  = 0
	controlCommit = 1
)

// Batch attribute bits and header positions of the v2 record batch.
const (
	attrTransactional  = 0x10
	attrControl        = 0x20
	offAttributes      = 21
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	crcCoveredFrom     = offAttributes
	offCRC             = 17
	noSequence         = -1
	controlKeyVersion  = 0
	endTxnValueVersion = 0
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// stampProducer marks a batch built by record.NewBatch as written by a
// producer (id, epoch, no sequence) with the given extra attribute bits,
// and recomputes its CRC.
func stampProducer(batch []byte, producerID int64, epoch int16, attrs uint16) {
	be := binary.BigEndian
	be.PutUint16(batch[offAttributes:], be.Uint16(batch[offAttributes:])|attrs)
	be.PutUint64(batch[offProducerID:], uint64(producerID))
	be.PutUint16(batch[offProducerEpoch:], uint16(epoch))
	be.PutUint32(batch[offBaseSequence:], ^uint32(0)) // noSequence
	be.PutUint32(batch[offCRC:], crc32.Checksum(batch[crcCoveredFrom:], castagnoli))
}

// controlBatch builds a COMMIT or ABORT marker of a producer, in Kafka's
// format: a control batch of one record whose key is the control record
// key (version, type) and whose value is the EndTxnMarker (version,
// coordinator epoch).
func controlBatch(producerID int64, epoch int16, commit bool, coordinatorEpoch int32, nowMs int64) []byte {
	key := kmsg.NewControlRecordKey()
	key.Version = controlKeyVersion
	key.Type = controlAbort
	if commit {
		key.Type = controlCommit
	}
	val := kmsg.NewEndTxnMarker()
	val.Version = endTxnValueVersion
	val.CoordinatorEpoch = coordinatorEpoch
	batch := record.NewBatch(nowMs, []record.Record{{Key: key.AppendTo(nil), Value: val.AppendTo(nil)}})
	stampProducer(batch, producerID, epoch, attrTransactional|attrControl)
	return batch
}

// controlType reads whether a control batch is a COMMIT marker.
func controlIsCommit(batch []byte) (bool, error) {
	recs, err := record.Records(batch)
	if err != nil {
		return false, err
	}
	if len(recs) == 0 || len(recs[0].Key) < 4 {
		return false, fmt.Errorf("%w: control batch without a control key", ErrCorruptMessage)
	}
	return binary.BigEndian.Uint16(recs[0].Key[2:4]) == controlCommit, nil
}

// WriteTxnMarker appends a COMMIT or ABORT marker for a producer's
// transaction and returns once it is durable. A marker older than the
// producer's epoch here is refused (ErrInvalidProducerEpoch); a newer one
// becomes the producer's epoch, fencing batches of the old one. The
// marker takes effect (the transaction ends here, read_committed readers
// move past it) as soon as it is appended; the fsync is waited for after
// produceMu is released, so the partition's producers append meanwhile
// and share it. In a cluster, a node that does not lead the partition
// has its leader write it (markers.go). Once the marker is durable, the
// hook set with OnTxnMarker hears of it, on the node that wrote it.
func (p *Partition) WriteTxnMarker(producerID int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	m := markerRequest{ProducerID: producerID, Epoch: epoch, Commit: commit, CoordinatorEpoch: coordinatorEpoch}
	if p.broker.Clustered() && p.CheckLeader() != nil {
		return p.forwardMarker(m)
	}
	return p.writeMarkerHere(m)
}

// writeMarkerHere is WriteTxnMarker on the partition's leader.
func (p *Partition) writeMarkerHere(m markerRequest) error {
	log, err := p.online()
	if err != nil {
		return err
	}
	c, err := p.appendTxnMarker(log, m.ProducerID, m.Epoch, m.Commit, m.CoordinatorEpoch)
	if err != nil {
		return err
	}
	if err := p.awaitCommit(c); err != nil {
		return err
	}
	p.broker.txnMarkerWritten(p, m.ProducerID, m.Commit)
	return nil
}

// appendTxnMarker is WriteTxnMarker's append; it returns the marker's
// commit, which its durability waits for.
func (p *Partition) appendTxnMarker(log replica.Log, producerID int64, epoch int16, commit bool, coordinatorEpoch int32) (replica.Commit, error) {
	p.produceMu.Lock()
	defer p.produceMu.Unlock()
	if err := p.ensureProducers(); err != nil {
		return replica.Commit{}, err
	}
	if e := p.producers.byID[producerID]; e != nil && epoch < e.Epoch {
		return replica.Commit{}, fmt.Errorf("%w: marker for producer %d at epoch %d, the partition has %d",
			ErrInvalidProducerEpoch, producerID, epoch, e.Epoch)
	}
	now := time.Now().UnixMilli()
	res, err := log.Append(controlBatch(producerID, epoch, commit, coordinatorEpoch, now), replica.AppendOptions{})
	if err != nil {
		return replica.Commit{}, p.storageError("append a transaction marker to", err)
	}
	p.producers.noteEpoch(producerID, epoch, now)
	p.txnMu.Lock()
	p.txns.end(producerID, res.BaseOffset, commit)
	p.txnMu.Unlock()
	p.wakeWaiters()
	return res.Commit, nil
}

// AppendTxnRecords appends records as one transactional batch of a
// producer, without sequence numbers: the broker's own writes inside a
// transaction (offsets of TxnOffsetCommit in __consumer_offsets). It
// returns once the batch is durable (waiting after produceMu is released).
func (p *Partition) AppendTxnRecords(producerID int64, epoch int16, recs []record.Record) error {
	log, err := p.online()
	if err != nil {
		return err
	}
	c, err := p.appendTxnRecords(log, producerID, epoch, recs)
	if err != nil {
		return err
	}
	return p.awaitCommit(c)
}

func (p *Partition) appendTxnRecords(log replica.Log, producerID int64, epoch int16, recs []record.Record) (replica.Commit, error) {
	now := time.Now().UnixMilli()
	batch := record.NewBatch(now, recs)
	stampProducer(batch, producerID, epoch, attrTransactional)
	p.produceMu.Lock()
	defer p.produceMu.Unlock()
	if err := p.ensureProducers(); err != nil {
		return replica.Commit{}, err
	}
	if e := p.producers.byID[producerID]; e != nil && epoch < e.Epoch {
		return replica.Commit{}, fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, producerID, epoch, e.Epoch)
	}
	fresh := p.beginTxnAt(producerID, log.EndOffset())
	res, err := log.Append(batch, replica.AppendOptions{})
	if err != nil {
		return replica.Commit{}, p.storageError("append to", err)
	}
	p.producers.noteEpoch(producerID, epoch, now)
	if fresh {
		p.fixTxnStart(producerID, res.BaseOffset)
	}
	p.wakeWaiters()
	return res.Commit, nil
}

// beginTxnAt registers the producer's transaction before its first batch
// is appended, at an offset no later than where the batch will land, so a
// read_committed reader never sees the batch below the stable offset. It
// reports whether the transaction is new here; then fixTxnStart moves its
// start to where the batch landed. produceMu must be held.
func (p *Partition) beginTxnAt(producerID, atMost int64) (fresh bool) {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	_, open := p.txns.ongoing[producerID]
	p.txns.begin(producerID, atMost)
	return !open
}

// fixTxnStart sets a new transaction's first offset once its first batch
// is written; an append that failed leaves the early (lower) start, which
// only delays read_committed readers until the transaction ends.
func (p *Partition) fixTxnStart(producerID, offset int64) {
	p.txnMu.Lock()
	if _, ok := p.txns.ongoing[producerID]; ok {
		p.txns.ongoing[producerID] = offset
	}
	p.txnMu.Unlock()
}

// LastStableOffset is the offset below which every transaction is decided:
// the first offset of the oldest ongoing transaction, or the high
// watermark when none is open. read_committed consumers read below it.
func (p *Partition) LastStableOffset() int64 {
	hw := p.HighWatermark()
	p.txnMu.Lock()
	first, ok := p.txns.firstUnstable()
	p.txnMu.Unlock()
	if ok && first < hw {
		return first
	}
	return hw
}

// AbortedTxns lists the aborted transactions that may have batches in
// [from, to): those whose marker is at or after from and which began
// before to.
func (p *Partition) AbortedTxns(from, to int64) []AbortedTxn {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	var out []AbortedTxn
	for _, a := range p.txns.aborted {
		if a.LastOffset >= from && a.FirstOffset < to {
			out = append(out, a)
		}
	}
	return out
}

// OngoingTxnProducers is how many producers have a transaction open here.
func (p *Partition) OngoingTxnProducers() int {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	return len(p.txns.ongoing)
}

// TxnGuard ties a transactional batch's append to its verification with
// the transaction coordinator (KIP-890 part 1; Kafka's VerificationGuard
// in UnifiedLog). Without it a marker could land between the two: the
// coordinator answers "in the transaction", EndTxn's marker ends the
// transaction here, and the batch, appended after it, opens a
// transaction no coordinator knows of, which no marker ever ends and
// which holds the last stable offset back for good. The zero TxnGuard
// is Kafka's sentinel: the producer's transaction was already open here.
type TxnGuard struct{ id uint64 }

// TxnOpen reports whether the producer had a transaction open on the
// partition when the guard was taken: the partition is the cache of the
// coordinator's positive answer, which need not be asked (as in Kafka).
func (g TxnGuard) TxnOpen() bool { return g.id == 0 }

// StartTxnVerification begins the verification of a transactional batch
// of the producer, before the coordinator is asked; the batch is then
// appended with AppendVerified and this guard. The append is refused
// ErrInvalidTxnState unless the producer has a transaction open here by
// then, or the guard is still its pending verification: a marker of the
// producer written in between ends the transaction open when the guard
// was taken, and spends a pending verification. A new leader's rebuilt
// table has no pending verification: a batch verified before the
// leadership moved away and back is refused too. firstSeq is the batch's
// first sequence: of the batches verified with one guard, one after the
// lowest is refused ErrOutOfOrderSequence until that one is in.
func (p *Partition) StartTxnVerification(producerID int64, firstSeq int32) (TxnGuard, error) {
	p.produceMu.Lock()
	defer p.produceMu.Unlock()
	// A new leader's table must be rebuilt first: a verification started
	// on the stale one would be dropped with it.
	if err := p.ensureProducers(); err != nil {
		return TxnGuard{}, err
	}
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	return p.txns.startVerification(producerID, firstSeq, time.Now().UnixMilli()), nil
}

// admit is txnTable.admit under txnMu.
func (p *Partition) admit(producerID int64, g TxnGuard, firstSeq int32) error {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	return p.txns.admit(producerID, g, firstSeq)
}

// noteEpoch makes epoch the producer's current epoch if it is newer,
// starting its sequence history afresh (a marker written at a bumped
// epoch fences the old one); tsMs is the batch's time (batchTimestamp).
func (s *producerStates) noteEpoch(producerID int64, epoch int16, tsMs int64) {
	e := s.byID[producerID]
	if e == nil || epoch > e.Epoch {
		s.byID[producerID] = &producerEntry{Epoch: epoch, LastTimestamp: tsMs}
		return
	}
	e.LastTimestamp = tsMs
}

// ReadCommitted is Read for read_committed consumers: only batches below
// the last stable offset are returned. It also returns that offset.
func (p *Partition) ReadCommitted(offset, maxBytes int64) (*replica.Slice, int64, error) {
	log, err := p.online()
	if err != nil {
		return nil, p.LastStableOffset(), err
	}
	// A new leader's table of open transactions is rebuilt from the log
	// before it bounds what read_committed readers see.
	p.produceMu.Lock()
	err = p.ensureProducers()
	p.produceMu.Unlock()
	lso := p.LastStableOffset()
	if err != nil {
		return nil, lso, err
	}
	s, err := log.ReadBelow(offset, maxBytes, lso)
	if err != nil {
		return nil, lso, p.readError(log, offset, err)
	}
	return s, lso, nil
}
