package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/wharf-mq/wharf/internal/record"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Snapshots of a partition.
//
// A partition's snapshot is its log, not a state blob: the snapshot at
// entry S (the anchor, below which a replica keeps no index) stands for
// the record batches from the log start offset up to the offset after S,
// as they lie in the leader's log, each with the leader epoch it was
// written under. The snapshot's data is only that marker, the two
// offsets; the host (internal/raft/snapshot.go) ships the batches beside
// Raft, Kafka-style, from where the follower asks:
//
//   - a follower that lags keeps what it has applied (its high watermark,
//     committed, so the same as the leader's) and asks for the rest;
//   - one whose high watermark lies below the leader's log start (its
//     records were deleted by retention meanwhile), or below its own,
//     asks from the leader's start and will empty its log.
//
// Below the anchor the leader's log may be compacted (RaftLog.Compact):
// batches thinned, split or gone, so offsets missing between them. A
// chunk therefore covers the offsets from where it says it starts, not
// from its first batch, and an empty chunk says that no batch is left
// below the snapshot's end; the follower writes an empty batch over each
// gap, so that its own log stays contiguous (its later passes drop them).
//
// The batches are staged in a separate log (stagingDir) until the last
// one is there. Then the offer goes to Raft, which hands the snapshot back
// to install: the install is recorded in the state file (fsynced), the
// log cut back to where the staged batches begin (or emptied), the staged
// batches copied in and fsynced, and the anchor moved to S, which ends the
// install. Recovery finishes an install it finds recorded without its
// anchor, from the staged log, which is deleted only after.

// stagingDir is where a follower stages a snapshot's batches.
const stagingDir = "snapshot"

// snapshotMarker is a snapshot's data: the records [start, end).
type snapshotMarker struct{ start, end int64 }

func (m snapshotMarker) encode() []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(m.start)), uint64(m.end))
}

func decodeMarker(b []byte) (snapshotMarker, error) {
	if len(b) != 16 {
		return snapshotMarker{}, fmt.Errorf("replica: snapshot data of %d bytes, want 16", len(b))
	}
	m := snapshotMarker{start: int64(binary.BigEndian.Uint64(b)), end: int64(binary.BigEndian.Uint64(b[8:]))}
	if m.start < 0 || m.end < m.start {
		return snapshotMarker{}, fmt.Errorf("replica: snapshot of records [%d, %d)", m.start, m.end)
	}
	return m, nil
}

// snapshotStage is a snapshot being staged on a follower.
type snapshotStage struct {
	index, term uint64
	marker      snapshotMarker
	from        int64 // where the staged batches begin (-1 until the first chunk of a reset)
	next        int64 // where the next chunk must begin
	reset       bool  // the log is emptied and starts at from
	log         *Local
	installing  *installing // set once the install is recorded
}

func (st *snapshotStage) complete() bool { return st.from >= 0 && st.next == st.marker.end }

// snapshotLocked is the snapshot at the anchor. Caller holds mu.
//
// It carries the membership as last applied, not as of the anchor: a
// member added since (a node joining the group, which starts empty and
// needs this snapshot) is not in the anchor's, and Raft refuses a
// snapshot that leaves out the node it is sent to. The follower then
// applies the changes after the anchor again; each sets one member's
// role, so it ends with the same membership.
func (r *raftReplica) snapshotLocked() *pb.Snapshot {
	a := r.anchor
	return &pb.Snapshot{
		Data:     snapshotMarker{start: min(r.local.StartOffset(), a.offset), end: a.offset}.encode(),
		Metadata: &pb.SnapshotMetadata{Index: new(a.index), Term: new(a.term), ConfState: ensureConfig(r.config)},
	}
}

// PrepareSnapshot answers a leader's snapshot offer (see raft.Replica):
// complete if Raft needs no data for it or it is staged, otherwise the
// offset to ask from, starting a stage for it if there is none.
func (r *raftReplica) PrepareSnapshot(s *pb.Snapshot) (int64, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	index, term := s.GetMetadata().GetIndex(), s.GetMetadata().GetTerm()
	if index <= r.applied || index <= r.lastIndex() && index > r.anchor.index && r.slotAt(index).term == term {
		return 0, true, nil // Raft takes the entries it has, not the snapshot
	}
	m, err := decodeMarker(s.GetData())
	if err != nil {
		return 0, false, err
	}
	if st := r.stage; st != nil && st.index == index && st.term == term && st.marker == m {
		return st.next, st.complete(), nil
	}
	if err := r.dropStage(); err != nil {
		return 0, false, err
	}
	st := &snapshotStage{index: index, term: term, marker: m, from: r.hw.Load()}
	// Below this replica's own start its log cannot be cut: after a
	// restart its high watermark can lie there (the last entry applied
	// before is not recorded), and then it starts over too.
	st.reset = r.whole || st.from < m.start || st.from < r.local.StartOffset()
	if st.reset {
		st.from = m.start
		if m.start < m.end {
			st.from = -1 // the base of the first batch sent, which holds m.start
		}
	}
	st.next = max(st.from, m.start)
	if st.log, err = r.openStaging(); err != nil {
		return 0, false, err
	}
	if st.from > 0 {
		if err := st.log.log.ResetTo(st.from); err != nil {
			return 0, false, err
		}
	}
	r.stage = st
	return st.next, st.complete(), nil
}

// openStaging opens an empty staging log.
func (r *raftReplica) openStaging() (*Local, error) {
	dir := filepath.Join(filepath.Dir(r.local.Dir()), stagingDir)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	return Open(dir, DefaultConfig(), Options{Logger: r.logger})
}

// dropStage deletes the stage, if any. Caller holds mu.
func (r *raftReplica) dropStage() error {
	st := r.stage
	r.stage = nil
	if st == nil {
		return nil
	}
	return st.log.Delete()
}

// StageSnapshot stages a chunk of the snapshot being staged; a chunk of
// another snapshot, or one that does not start where the stage ends, is
// ignored (the next request asks again), but for a whole snapshot's chunk
// at its start, which starts the stage over. A chunk covers the offsets from
// where it starts to the end of its last batch, or with no batches, to
// the snapshot's end: the leader's log may have gaps there, where its
// compaction removed records (see SnapshotData).
func (r *raftReplica) StageSnapshot(index, term uint64, offset int64, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stage
	if st == nil || st.index != index || st.term != term || st.installing != nil || st.complete() {
		return nil
	}
	// The leader sends a whole snapshot again from its start
	// (SnapshotData): what is staged may be of another version of its log.
	restart := st.reset && offset == st.marker.start && offset != st.next
	if offset != st.next && !restart {
		return nil
	}
	if restart {
		st.from = -1
	}
	if st.from < 0 {
		// A reset's first chunk: the staged log starts where the leader's
		// does, inside the first batch or in a gap before it.
		from := offset
		if len(data) > 0 {
			h, err := record.ParseHeader(data)
			if err != nil {
				return err
			}
			from = min(from, h.BaseOffset)
		}
		if err := st.log.log.ResetTo(from); err != nil {
			return err
		}
		st.from, st.next = from, from
	}
	end, err := stageBatches(st.log, data, st.marker.end, int32(st.term))
	if err != nil {
		return err
	}
	st.next = end
	return nil
}

// stageBatches appends a chunk of a leader's snapshot data to the staged
// log l at the batches' offsets and returns the offset after them. Where
// the leader's compacted log has a gap (before a batch, or up to limit
// when the chunk has none) it writes an empty batch covering it, so that
// the staged log, and the log it is installed into, stay contiguous, as
// seglog requires of a log it appends to. The empty batch takes the epoch
// of the batch after it, or at the end the snapshot's term (lastTerm): an
// epoch no batch before it can exceed, in the staged log or in the log it
// continues. An empty batch that begins below the log's end (a gap the
// leader filled, which a chunk from inside it starts with) is a gap from
// there on.
func stageBatches(l *Local, batches []byte, limit int64, lastTerm int32) (int64, error) {
	if len(batches) == 0 {
		return fillGap(l, limit, lastTerm)
	}
	for len(batches) > 0 {
		run, next := 0, l.EndOffset() // batches[:run] continue the log from next
		for run < len(batches) {
			h, err := record.ParseHeader(batches[run:])
			if err != nil {
				return l.EndOffset(), err
			}
			if h.BaseOffset != next {
				break
			}
			run += h.Size()
			next = h.LastOffset() + 1
		}
		if run > 0 {
			if _, err := appendByEpoch(l, batches[:run], limit); err != nil {
				return l.EndOffset(), err
			}
			batches = batches[run:]
			continue
		}
		h, _ := record.ParseHeader(batches) // parsed above
		switch {
		case h.RecordCount == 0 && h.BaseOffset < next && h.LastOffset() >= next && h.LastOffset() < limit:
			// An empty batch the leader wrote over a gap of its own
			// (fillGap, when it caught up from a snapshot) may span what
			// were several batches here, and a chunk from inside it
			// starts with it: its part from next on is a gap.
			if _, err := fillGap(l, h.LastOffset()+1, h.PartitionLeaderEpoch); err != nil {
				return l.EndOffset(), err
			}
			batches = batches[h.Size():]
		case h.BaseOffset < next || h.LastOffset() >= limit:
			return next, fmt.Errorf("replica: snapshot batch [%d, %d] does not continue the staged log at %d below %d",
				h.BaseOffset, h.LastOffset(), next, limit)
		default:
			if _, err := fillGap(l, h.BaseOffset, h.PartitionLeaderEpoch); err != nil {
				return l.EndOffset(), err
			}
		}
	}
	return l.EndOffset(), nil
}

// fillGap writes empty batches of epoch covering the offsets from l's
// end to end, and returns end.
func fillGap(l *Local, end int64, epoch int32) (int64, error) {
	for from := l.EndOffset(); from < end; from = l.EndOffset() {
		last := min(end-1, from+math.MaxInt32)
		if _, err := l.AppendAt(record.EmptyBatch(from, last), epoch); err != nil {
			return from, err
		}
	}
	return end, nil
}

// appendByEpoch appends batches (as a leader's log holds them, each
// stamped with its epoch) to l at their offsets, one write per run of an
// epoch, and returns the offset after them. Batches must end by limit.
func appendByEpoch(l *Local, batches []byte, limit int64) (int64, error) {
	end := l.EndOffset()
	for len(batches) > 0 {
		run, epoch := 0, int32(0)
		for run < len(batches) {
			h, err := record.ParseHeader(batches[run:])
			if err != nil {
				return end, err
			}
			if run > 0 && h.PartitionLeaderEpoch != epoch {
				break
			}
			if h.LastOffset() >= limit {
				return end, fmt.Errorf("replica: snapshot batch [%d, %d] runs past its end %d", h.BaseOffset, h.LastOffset(), limit)
			}
			epoch = h.PartitionLeaderEpoch
			run += h.Size()
			end = h.LastOffset() + 1
		}
		if _, err := l.AppendAt(batches[:run], epoch); err != nil {
			return end, err
		}
		batches = batches[run:]
	}
	return end, nil
}

// install installs a staged snapshot Raft handed back. Caller holds mu.
func (r *raftReplica) install(s *pb.Snapshot) error {
	index, term := s.GetMetadata().GetIndex(), s.GetMetadata().GetTerm()
	st := r.stage
	if st == nil || st.index != index || st.term != term || !st.complete() {
		return fmt.Errorf("replica: snapshot at entry %d (term %d) to install is not staged", index, term)
	}
	if err := st.log.Sync(); err != nil {
		return err
	}
	in := &installing{index: index, term: term, from: st.from, end: st.marker.end, reset: st.reset,
		config: s.GetMetadata().GetConfState()}
	r.state.add(recInstall, in.index, in.term, in.from, in.end, in.reset, ensureConfig(in.config))
	if err := r.state.sync(); err != nil {
		return err
	}
	st.installing = in
	return r.completeInstall(in)
}

// completeInstall does the install the state file records, from the
// staged log: at a snapshot's arrival, or again after a crash. Caller
// holds mu.
func (r *raftReplica) completeInstall(in *installing) error {
	if r.installs.Load()%2 == 0 { // odd while the log changes under its readers (still, if an install failed)
		r.installs.Add(1)
	}
	staged := r.stage.log
	if staged.StartOffset() > in.from || staged.EndOffset() != in.end {
		return &CorruptionError{File: staged.Dir(), Err: fmt.Errorf(
			"the staged snapshot holds [%d, %d), the install records [%d, %d)", staged.StartOffset(), staged.EndOffset(), in.from, in.end)}
	}
	var err error
	switch {
	case in.reset:
		err = r.local.log.ResetTo(in.from)
	case r.local.EndOffset() > in.from:
		err = r.local.TruncateTo(in.from)
	case r.local.EndOffset() < in.from:
		err = fmt.Errorf("replica: the log ends at %d, below the snapshot's records from %d", r.local.EndOffset(), in.from)
	}
	if err != nil {
		return err
	}
	for off := in.from; off < in.end; {
		b, err := readBelow(staged, off, in.end, 8<<20)
		if err == nil && len(b) == 0 {
			err = fmt.Errorf("replica: the staged snapshot has no batch at offset %d below %d", off, in.end)
		}
		if err != nil {
			return err
		}
		if off, err = appendByEpoch(r.local, b, in.end); err != nil {
			return err
		}
	}
	if err := r.local.Sync(); err != nil {
		return err
	}
	r.anchor = anchor{index: in.index, term: in.term, offset: in.end, config: in.config}
	r.slots = nil
	r.config, r.configIndex = in.config, in.index
	r.applied = in.index
	r.hard.commit = max(r.hard.commit, in.index)
	r.hw.Store(in.end)
	r.state.add(recAnchor, in.index, in.term, in.end, ensureConfig(in.config))
	if err := r.state.sync(); err != nil {
		return err
	}
	r.installs.Add(1)
	r.logger.Info("installed a snapshot", "index", in.index, "term", in.term, "from", in.from, "end", in.end, "reset", in.reset)
	err = r.dropStage()
	r.events.advanced()
	return err
}

// readBelow reads whole batches from offset, about maxBytes of them, all
// below limit; none if there are none (a compacted log's gap).
func readBelow(l *Local, offset, limit, maxBytes int64) ([]byte, error) {
	sl, err := l.ReadBelow(offset, maxBytes, limit)
	if err != nil {
		return nil, err
	}
	defer sl.Release()
	return sl.Bytes()
}

// errSnapshotGone: a follower asked for a snapshot this replica no longer
// offers.
var errSnapshotGone = errors.New("replica: the snapshot asked for is no longer offered")

// SnapshotData streams, on a leader, the records of its snapshot at
// (index, term) from offset on (see raft.Replica). It runs beside the
// host's loop.
func (r *raftReplica) SnapshotData(index, term uint64, offset int64, send func(int64, []byte) error) error {
	r.mu.RLock()
	ok := index >= r.anchor.index && index <= r.lastIndex()
	var end int64
	if ok {
		t := r.anchor.term
		if index > r.anchor.index {
			t = r.slotAt(index).term
		}
		ok, end = t == term, r.endOf(index)
	}
	start := min(r.local.StartOffset(), end) // the marker's (snapshotLocked)
	r.mu.RUnlock()
	if !ok {
		return errSnapshotGone
	}
	// A whole snapshot (the metadata log's, replayed from its start) must
	// be one version of the log: a pass swapping segments between two
	// chunks can drop a record the follower has and the tombstone it has
	// not. So it is sent from its start, on a resume too (the follower
	// may have staged its first chunks before a pass), and again from
	// the start when a pass swaps segments meanwhile; a chunk at the
	// start restarts the follower's stage (StageSnapshot).
	swaps := r.local.log.Swaps()
	if r.whole {
		offset = start
	}
	for offset < end {
		if r.whole && r.local.log.Swaps() != swaps {
			swaps, offset = r.local.log.Swaps(), start
		}
		b, err := readBelow(r.local, offset, end, snapshotChunkBytes)
		if err != nil {
			return err
		}
		if len(b) == 0 {
			// Compaction left no batch in [offset, end): the empty chunk
			// says so, and the follower fills the gap.
			return send(offset, nil)
		}
		next, err := batchesEnd(b)
		if err != nil {
			return err
		}
		// The chunk covers from offset, not from its first batch: the
		// offsets between were compacted away.
		if err := send(offset, b); err != nil {
			return err
		}
		offset = next
	}
	return nil
}

// snapshotChunkBytes is about how many bytes of records a chunk carries.
const snapshotChunkBytes = 1 << 20

// batchesEnd is the offset after the last of the batches in b.
func batchesEnd(b []byte) (int64, error) {
	var end int64
	for len(b) > 0 {
		h, err := record.ParseHeader(b)
		if err != nil {
			return 0, err
		}
		end = h.LastOffset() + 1
		b = b[h.Size():]
	}
	return end, nil
}
