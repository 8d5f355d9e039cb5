package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Partition is one partition of a topic: a log plus the wake-ups of readers
// waiting for it to grow.
type Partition struct {
	broker *Broker
	topic  *Topic
	index  int32
	dir    string

	log     replica.Log // nil if the log could not be opened
	offline error       // why the log could not be opened; see Offline for the rest

	// In a cluster (cluster.go): the replicas, the replica here if there
	// is one (the same as log), or remote if this node holds none; and
	// the term producers was rebuilt for.
	replicas      atomic.Pointer[[]int32] // changed by a reassignment (reassign.go)
	raft          *replica.RaftLog
	remote        bool
	producersTerm uint64

	waitMu  sync.Mutex
	waiters map[chan<- struct{}]struct{}
	// stopWatch ends the goroutine that waits for the replica's next
	// change on the waiters' behalf (a cluster's partition); nil while
	// none runs.
	stopWatch chan struct{}

	produceMu        sync.Mutex      // orders idempotent appends with their producer checks
	producers        *producerStates // guarded by produceMu
	producerSnapshot int64           // log end offset of the last snapshot; guarded by produceMu

	txnMu sync.Mutex // guards txns; writers hold produceMu too
	txns  txnTable   // open and aborted transactions (txn_state.go)

	traffic traffic // bytes in and out, for metrics (traffic.go)
}

// Index is the partition's number within its topic.
func (p *Partition) Index() int32 { return p.index }

// Offline returns the error that keeps the partition from serving, or nil:
// a *replica.CorruptionError found at start-up, or one the scrubber found
// since (the partition then goes offline while the broker runs).
func (p *Partition) Offline() error {
	if p.offline != nil || p.remote {
		return p.offline
	}
	return p.log.Corruption()
}

func (p *Partition) online() (replica.Log, error) {
	if err := p.Offline(); err != nil {
		return nil, fmt.Errorf("%w: %s-%d is offline: %v", ErrStorage, p.topic.name, p.index, err)
	}
	if err := p.CheckLeader(); err != nil {
		return nil, err
	}
	return p.log, nil
}

// Produce validates the batches in records, appends them, and returns the
// offset given to the first record once they are as durable as acks
// requires (see Append).
func (p *Partition) Produce(records []byte, acks int16) (baseOffset, logAppendTime int64, err error) {
	res, err := p.Append(records, acks)
	if err == nil {
		err = res.Wait(context.Background())
	}
	if err != nil {
		return -1, -1, err
	}
	return res.BaseOffset, res.LogAppendTime, nil
}

// ProduceAsync is Append for callers that wait without a deadline: wait
// is the Produced's Wait, and must be called once when err is nil.
func (p *Partition) ProduceAsync(records []byte, acks int16) (baseOffset, logAppendTime int64, wait func() error, err error) {
	res, err := p.Append(records, acks)
	if err != nil {
		return -1, -1, nil, err
	}
	return res.BaseOffset, res.LogAppendTime, func() error { return res.Wait(context.Background()) }, nil
}

// Produced is an append Append made: where it went, and what its
// acknowledgement waits for.
type Produced struct {
	BaseOffset int64 // the offset of the first record
	// LogAppendTime is -1 unless the topic stamps batches with the
	// broker's clock.
	LogAppendTime int64

	p   *Partition
	ack replica.Commit
}

// Wait blocks until the append is as durable as its acks require under
// the broker's fsync policy (replica.FsyncPolicy): for acks=-1 under
// FsyncOnAcksAll (and for every acks under FsyncAlways) until the log
// commits it, an fsync group-committed with every other waiter, and in a
// cluster a majority of the replicas. If ctx ends first it fails with
// ErrRequestTimedOut (a Kafka producer's request timeout): the records
// stay in the log, and may still be committed.
func (r Produced) Wait(ctx context.Context) error {
	err := r.ack.Wait(ctx) // the zero Commit (acks waiting for nothing) returns at once
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %s-%d: records from offset %d not committed in time: %v",
			ErrRequestTimedOut, r.p.topic.name, r.p.index, r.BaseOffset, err)
	}
	return r.p.storageError("sync", err)
}

// awaitCommit waits for c, wrapping a failure.
func (p *Partition) awaitCommit(c replica.Commit) error {
	if err := c.Wait(context.Background()); err != nil {
		return p.storageError("sync", err)
	}
	return nil
}

// Append validates the batches in records and appends them, returning as
// soon as they are in the log: offsets assigned, visible to the next
// append (and to readers once committed). Produced.Wait then waits until
// they are as durable as acks requires. Splitting the two lets a front
// end start a pipelined client's next append while this one waits for
// the disk.
//
// Batches of an idempotent producer are checked against its sequence
// numbers first: a retried batch returns its original offset unwritten
// (and waits for that original to be durable). records is not kept after
// Append returns, so the caller may reuse its buffer.
func (p *Partition) Append(records []byte, acks int16) (Produced, error) {
	return p.append(records, acks, nil)
}

// AppendVerified is Append for a transactional batch verified with the
// transaction coordinator under guard (StartTxnVerification): it is
// refused ErrInvalidTxnState if the producer's transaction ended here
// since.
func (p *Partition) AppendVerified(records []byte, acks int16, guard TxnGuard) (Produced, error) {
	return p.append(records, acks, &guard)
}

// append is Append, checking a transactional batch against guard unless
// it is nil (no verification asked for).
func (p *Partition) append(records []byte, acks int16, guard *TxnGuard) (Produced, error) {
	log, err := p.online()
	if err != nil {
		return Produced{}, err
	}
	cfg := p.topic.currentConfig()
	headers, err := validateBatches(records, cfg)
	if err != nil {
		return Produced{}, err
	}
	if err := p.checkInSync(acks, cfg); err != nil {
		return Produced{}, err
	}
	opts := replica.AppendOptions{AckCommitted: acks == -1}
	if cfg.logAppendTime() {
		opts.LogAppendTime = time.Now().UnixMilli()
	}
	var res replica.Appended
	if headers[0].ProducerID < 0 {
		if res, err = log.Append(records, opts); err != nil {
			err = p.storageError("append to", err)
		}
	} else {
		res, err = p.appendIdempotent(log, records, headers, opts, guard)
	}
	if err != nil {
		return Produced{}, err
	}
	if p.raft == nil {
		p.wakeWaiters() // readable now; a replicated append once committed (Notify)
	}
	p.traffic.in.Add(int64(len(records)))
	out := Produced{BaseOffset: res.BaseOffset, LogAppendTime: -1, p: p, ack: res.Ack}
	if cfg.logAppendTime() {
		out.LogAppendTime = res.LogAppendTime
	}
	return out, nil
}

// appendIdempotent appends the batches of one idempotent producer, or
// answers a retried batch with the offset it got the first time. The check
// and the append happen under produceMu so two copies of a batch racing
// each other cannot both be written, and a marker (which takes produceMu
// too) cannot land between a transactional batch's guard check and its
// append.
func (p *Partition) appendIdempotent(log replica.Log, records []byte, headers []record.Header, opts replica.AppendOptions, guard *TxnGuard) (replica.Appended, error) {
	first := headers[0]
	for _, h := range headers[1:] {
		if h.ProducerID != first.ProducerID || h.ProducerEpoch != first.ProducerEpoch {
			return replica.Appended{}, fmt.Errorf("%w: batches of different producers in one request", ErrInvalidRecord)
		}
	}
	p.produceMu.Lock()
	defer p.produceMu.Unlock()
	if err := p.ensureProducers(); err != nil {
		return replica.Appended{}, err
	}
	dup, err := p.producers.check(first)
	if err != nil {
		return replica.Appended{}, err
	}
	if dup != nil {
		last := dup.FirstOffset + int64(first.LastOffsetDelta)
		return replica.Appended{BaseOffset: dup.FirstOffset, LastOffset: last, LogAppendTime: -1,
			Ack: log.AckFor(opts.AckCommitted, last+1)}, nil
	}
	if guard != nil && first.Transactional() {
		if err := p.admit(first.ProducerID, *guard, first.BaseSequence); err != nil {
			return replica.Appended{}, fmt.Errorf("%s-%d: %w", p.topic.name, p.index, err)
		}
	}
	freshTxn := first.Transactional() && p.beginTxnAt(first.ProducerID, log.EndOffset())
	res, err := log.Append(records, opts)
	if err != nil {
		return res, p.storageError("append to", err)
	}
	if freshTxn {
		p.fixTxnStart(first.ProducerID, res.BaseOffset)
	}
	offset := res.BaseOffset
	for _, h := range headers {
		p.producers.record(h, offset, batchTimestamp(h, opts.LogAppendTime))
		offset += int64(h.LastOffsetDelta) + 1
	}
	return res, nil
}

// validateBatches checks every batch of a produce payload the way Kafka's
// log validator does before anything is written.
func validateBatches(records []byte, cfg topicConfig) ([]record.Header, error) {
	if len(records) == 0 {
		return nil, fmt.Errorf("%w: no record batches", ErrInvalidRecord)
	}
	var headers []record.Header
	maxBatch, segmentBytes := cfg.int("max.message.bytes"), cfg.int("segment.bytes")
	for rest := records; len(rest) > 0; {
		// Message formats v0 and v1 keep their magic byte where v2 does.
		if len(rest) > magicOffset && rest[magicOffset] < 2 {
			return nil, fmt.Errorf("%w: message format v%d; Wharf stores v2 record batches only", ErrInvalidRecord, rest[magicOffset])
		}
		h, err := record.ParseHeader(rest)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorruptMessage, err)
		}
		switch size := int64(h.Size()); {
		case size > segmentBytes:
			return nil, fmt.Errorf("%w: batch of %d bytes, segment.bytes %d", ErrBatchTooLarge, size, segmentBytes)
		case size > maxBatch:
			return nil, fmt.Errorf("%w: batch of %d bytes, limit %d", ErrRecordTooLarge, size, maxBatch)
		}
		if err := validateBatch(rest[:h.Size()], maxBatch, cfg.compact()); err != nil {
			return nil, err
		}
		if h.RecordCount == 0 {
			return nil, fmt.Errorf("%w: a produced batch must hold at least one record", ErrInvalidRecord)
		}
		headers = append(headers, h)
		rest = rest[h.Size():]
	}
	return headers, nil
}

// validateBatch decodes every record of a batch, streaming a compressed
// one through a bounded decoder. Its records may not decompress past
// max.message.bytes: Kafka's producers size their batches uncompressed
// (franz-go, librdkafka and sarama at 1,000,000 bytes or so, below the
// default 1 MiB), and Java's split a batch refused as too large, so only a
// decompression bomb is turned away. On a compacted topic every record
// needs a key, as in Kafka: compaction keeps the latest record per key, so
// a keyless record has no meaning there.
func validateBatch(batch []byte, maxBatch int64, compacted bool) error {
	_, err := record.ValidateWithin(batch, record.Limits{MaxSize: int(maxBatch), KeyRequired: compacted})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, record.ErrTooLarge):
		return fmt.Errorf("%w: %v", ErrRecordTooLarge, err)
	case errors.Is(err, record.ErrNoKey):
		return fmt.Errorf("%w: compacted topic cannot accept a record without a key (%v)", ErrInvalidRecord, err)
	}
	return fmt.Errorf("%w: %v", ErrCorruptMessage, err)
}

// magicOffset is where every Kafka message format keeps its version byte.
const magicOffset = 16

// Read returns whole batches from the one containing offset, up to maxBytes
// but at least one batch, below the high watermark. The caller must
// Release the slice.
func (p *Partition) Read(offset, maxBytes int64) (*replica.Slice, error) {
	log, err := p.online()
	if err != nil {
		return nil, err
	}
	s, err := log.Read(offset, maxBytes)
	if err != nil {
		return nil, p.readError(log, offset, err)
	}
	return s, nil
}

// readError wraps a failed read of offset.
func (p *Partition) readError(log replica.Log, offset int64, err error) error {
	if errors.Is(err, replica.ErrOffsetOutOfRange) {
		return fmt.Errorf("%w: %d is outside [%d, %d] of %s-%d", ErrOffsetOutOfRange,
			offset, log.StartOffset(), log.HighWatermark(), p.topic.name, p.index)
	}
	return p.storageError("read", err)
}

// Sync fsyncs everything appended to the partition so far, whatever the
// fsync policy: for a user that acknowledges writes made with acks=1 once
// it has fsynced them itself (the stream bridge's publisher confirms). A
// closed log is an error, not a success: closed because the topic was
// deleted or the broker stopped, it can no longer say whether what was
// appended reached the disk, and a confirm must not claim it did.
func (p *Partition) Sync() error {
	log, err := p.online()
	if err != nil {
		return err
	}
	if err := log.Sync(); err != nil {
		return p.storageError("sync", err)
	}
	return nil
}

// storageError wraps a log failure. A closed log means the topic was
// deleted under the caller, which clients should see as an unknown topic.
func (p *Partition) storageError(op string, err error) error {
	if errors.Is(err, replica.ErrNotLeader) || errors.Is(err, replica.ErrTruncated) || errors.Is(err, replica.ErrAppendRefused) {
		// Leadership moved (or is moving, or this leader's followers are
		// too far behind to take more): the new leader has (or never had)
		// it, and a client that looks again and retries loses nothing.
		return fmt.Errorf("%w: %s %s-%d: %v", ErrNotLeader, op, p.topic.name, p.index, err)
	}
	if errors.Is(err, replica.ErrClosed) {
		return fmt.Errorf("%w: %s-%d was deleted", ErrUnknownTopic, p.topic.name, p.index)
	}
	return fmt.Errorf("%w: %s %s-%d: %v", ErrStorage, op, p.topic.name, p.index, err)
}

// StartOffset is the log start offset (-1 while offline).
func (p *Partition) StartOffset() int64 {
	if p.log == nil {
		return -1
	}
	return p.log.StartOffset()
}

// EndOffset is the log end offset: the offset the next record will get.
func (p *Partition) EndOffset() int64 {
	if p.log == nil {
		return -1
	}
	return p.log.EndOffset()
}

// HighWatermark is the offset below which consumers may read (-1 while
// offline). On a single node every written record is as replicated as it
// will ever be, so it equals the log end offset, as in a one-replica Kafka
// partition.
func (p *Partition) HighWatermark() int64 {
	if p.log == nil {
		return -1
	}
	return p.log.HighWatermark()
}

// Size is the partition's size on disk in bytes.
func (p *Partition) Size() int64 {
	if p.log == nil {
		return 0
	}
	return p.log.Size()
}

// OffsetForTime returns the first record whose timestamp is at least ts.
func (p *Partition) OffsetForTime(ts int64) (offset, timestamp int64, found bool, err error) {
	log, err := p.online()
	if err != nil {
		return -1, -1, false, err
	}
	return log.OffsetForTime(ts)
}

// MaxTimestamp returns the record with the largest timestamp (ListOffsets -3).
func (p *Partition) MaxTimestamp() (offset, timestamp int64) {
	if p.log == nil {
		return -1, -1
	}
	return p.log.MaxTimestamp()
}

// DeleteBefore advances the log start offset to offset (DeleteRecords);
// offset -1 means the high watermark. It returns the new log start offset.
func (p *Partition) DeleteBefore(offset int64) (lowWatermark int64, err error) {
	if p.topic.Internal() {
		// Kafka's answer: the coordinators' records must stay.
		return -1, fmt.Errorf("%w: Cannot delete records of internal topic %s", ErrInvalidTopic, p.topic.name)
	}
	log, err := p.online()
	if err != nil {
		return -1, err
	}
	hw := log.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, fmt.Errorf("%w: cannot delete below %d, the high watermark is %d", ErrOffsetOutOfRange, offset, hw)
	}
	return log.DeleteBefore(offset)
}

// Notify registers a one-shot wake-up: ch gets a non-blocking send once
// there may be more to read. Fetch long polls use it. On a single node
// that is the next append. A replicated partition's records are
// readable only once committed, so there it is the next move of the
// replica's high watermark, or of its leadership (a fetch waiting on a
// node that stops leading is answered NOT_LEADER_OR_FOLLOWER at once).
func (p *Partition) Notify(ch chan<- struct{}) {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	if p.waiters == nil {
		p.waiters = make(map[chan<- struct{}]struct{})
	}
	p.waiters[ch] = struct{}{}
	if p.raft != nil && p.stopWatch == nil {
		// The channel is taken now, before the caller reads: a change
		// between its read and its wait closes it.
		p.stopWatch = make(chan struct{})
		go p.watchReplica(p.raft.Changed(), p.stopWatch)
	}
}

// Unnotify removes a wake-up registered with Notify that has not fired.
func (p *Partition) Unnotify(ch chan<- struct{}) {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	delete(p.waiters, ch)
	if len(p.waiters) == 0 {
		p.endWatchLocked()
	}
}

// watchReplica wakes the waiters at the replica's next change, then
// ends; it ends sooner once no one waits (stop) or the broker stops.
func (p *Partition) watchReplica(changed <-chan struct{}, stop <-chan struct{}) {
	select {
	case <-changed:
		p.wakeWaiters()
	case <-stop:
	case <-p.broker.stop:
	}
}

// endWatchLocked ends the goroutine watching the replica for the
// waiters, if one runs. Caller holds waitMu.
func (p *Partition) endWatchLocked() {
	if p.stopWatch != nil {
		close(p.stopWatch)
		p.stopWatch = nil
	}
}

func (p *Partition) wakeWaiters() {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	for ch := range p.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	clear(p.waiters)
	p.endWatchLocked()
}
