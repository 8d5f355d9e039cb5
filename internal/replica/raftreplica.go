package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// raftReplica is one node's replica of a Raft log, what the host reads
// and writes (raft.Replica): a Local holding the entries that carry
// records, one record batch per entry at the batch's own offsets with the
// entry's term as its leader epoch; the state file (raftstate.go) holding
// the hard state, the membership and the entries without records; and in
// memory the index of the entries kept (slots), which translates between
// Raft indexes and offsets.
type raftReplica struct {
	local  *Local
	state  *stateFile
	logger *slog.Logger
	window uint64 // entries kept below the applied one for followers that lag
	events replicaEvents
	whole  bool // RaftOptions.WholeSnapshots

	// installs counts the starts and ends of snapshot installs since the
	// replica opened: odd while one is changing the log (or failed to).
	installs atomic.Uint64

	mu          sync.RWMutex // guards everything below
	hard        hardState    // as Raft last gave it (the commit index in the file is only a hint)
	savedTerm   uint64       // term and vote in the state file
	savedVote   uint64
	anchor      anchor
	slots       []slot // entries anchor.index+1, anchor.index+2, ...
	config      *pb.ConfState
	configIndex uint64
	applied     uint64
	leading     bool
	matched     uint64 // on a leader: every member's log matches up to here
	stage       *snapshotStage
	// batchBarrier is the state record a batch written now must find
	// durable (stateFile.add's number): the last entry without records or
	// truncate record, which recovery reads before the batches after it.
	batchBarrier uint64

	hw atomic.Int64 // the high watermark: after the last entry applied, or known committed as leader (Committed)
}

// slot is one entry of the index.
type slot struct {
	end  int64     // the offset after the entry (its records', or where it sits)
	term uint64    // its term, the leader epoch of its records
	meta *pb.Entry // the entry, if it carries no records; nil if it is a batch
}

// replicaEvents is who hears what the host tells a replica: the Raft log
// above it.
type replicaEvents interface {
	stateChanged(s raft.Status)
	advanced()
}

// maxWindow bounds the entries a leader keeps for a follower that lags:
// one lagging further catches up from a snapshot.
const maxWindow = 1 << 18

var errReplicaGone = errors.New("replica: entries requested that the replica does not hold")

var _ raft.Replica = (*raftReplica)(nil)

// lastIndex is the index of the last entry. Caller holds mu.
func (r *raftReplica) lastIndex() uint64 { return r.anchor.index + uint64(len(r.slots)) }

// endOf is the offset after entry i, for i in [anchor.index, lastIndex].
// Caller holds mu.
func (r *raftReplica) endOf(i uint64) int64 {
	if i == r.anchor.index {
		return r.anchor.offset
	}
	return r.slots[i-r.anchor.index-1].end
}

// slotAt is entry i's slot, for i in (anchor.index, lastIndex]. Caller
// holds mu.
func (r *raftReplica) slotAt(i uint64) slot { return r.slots[i-r.anchor.index-1] }

// InitialState is the hard state and the membership (etcd raft's Storage).
func (r *raftReplica) InitialState() (*pb.HardState, *pb.ConfState, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	hs := &pb.HardState{Term: new(r.hard.term), Vote: new(r.hard.vote), Commit: new(r.hard.commit)}
	return hs, ensureConfig(r.config), nil
}

// FirstIndex is the first entry kept.
func (r *raftReplica) FirstIndex() (uint64, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.anchor.index + 1, nil
}

// LastIndex is the last entry written.
func (r *raftReplica) LastIndex() (uint64, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lastIndex(), nil
}

// Term is the term of entry i, in [FirstIndex-1, LastIndex].
func (r *raftReplica) Term(i uint64) (uint64, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	switch {
	case i < r.anchor.index:
		return 0, etcdraft.ErrCompacted
	case i == r.anchor.index:
		return r.anchor.term, nil
	case i > r.lastIndex():
		return 0, etcdraft.ErrUnavailable
	}
	return r.slotAt(i).term, nil
}

// Entries returns the entries [lo, hi), at least one, at most maxSize
// bytes of them: the batches read back from the log, the others from
// memory.
func (r *raftReplica) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if lo <= r.anchor.index {
		return nil, etcdraft.ErrCompacted
	}
	if hi > r.lastIndex()+1 || lo >= hi {
		return nil, etcdraft.ErrUnavailable
	}
	var ents []*pb.Entry
	var size uint64
	var data []byte // batches read ahead, from offset dataAt
	dataAt, dataEnd := r.endOf(lo-1), r.endOf(hi-1)
	for i := lo; i < hi; i++ {
		s := r.slotAt(i)
		e := s.meta
		if e == nil {
			if len(data) == 0 {
				// Every batch up to the last entry asked for, or maxSize of
				// them, in one read: not one read per entry.
				var err error
				if data, err = r.readBatches(dataAt, dataEnd, max(maxSize-min(size, maxSize), 1)); err != nil {
					return nil, err
				}
			}
			h, err := record.ParseHeader(data)
			if err != nil || h.BaseOffset != dataAt || h.LastOffset()+1 != s.end {
				// Compaction or retention removed what the index says is
				// here: the entry is not to be had any more.
				return nil, etcdraft.ErrCompacted
			}
			e = &pb.Entry{Index: new(i), Term: new(s.term), Type: pb.EntryNormal.Enum(), Data: data[:h.Size():h.Size()]}
			data = data[h.Size():]
			dataAt = s.end
		}
		if size += uint64(len(e.GetData())) + 16; size > maxSize && len(ents) > 0 {
			break
		}
		ents = append(ents, e)
	}
	return ents, nil
}

// readBatches reads whole batches from offset on, at least the one there,
// about maxBytes in all, none at or past limit. Caller holds mu.
func (r *raftReplica) readBatches(offset, limit int64, maxBytes uint64) ([]byte, error) {
	// From the start offset if it moved inside the batch at offset: the
	// batch is still there, whole.
	sl, err := r.local.ReadBelow(max(offset, r.local.StartOffset()), int64(min(maxBytes, 1<<30)), limit)
	if err != nil {
		return nil, err
	}
	defer sl.Release()
	return sl.Bytes()
}

// Snapshot is the snapshot at the anchor: its metadata, and as data where
// its records lie in the log (raftsnapshot.go).
func (r *raftReplica) Snapshot() (*pb.Snapshot, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.snapshotLocked(), nil
}

// Applied is the last entry applied.
func (r *raftReplica) Applied() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.applied
}

// Write stores a Ready's hard state, snapshot and entries (see
// raft.Replica). Entries that carry records go to the log, consecutive
// ones of a term with one write; the others to the state file. It stops,
// for the host to sync before it writes the rest, after cutting the log
// (a follower's divergent suffix), after installing a snapshot, and
// before a batch while the state file's last entry or cut before it,
// written by this Write or an earlier one, is not yet durable: the two
// files reach the disk independently, and a batch durable without the
// entry before it (a new term's empty entry, a membership change) is one
// recovery cannot place (raftrecover.go).
func (r *raftReplica) Write(w *raft.Write) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.HardState != nil {
		r.saveHardState(w.HardState)
	}
	if !etcdraft.IsEmptySnap(w.Snapshot) {
		if err := r.install(w.Snapshot); err != nil {
			return 0, err
		}
		return 0, r.state.flush()
	}
	n, err := r.writeEntries(w.Entries)
	if err != nil {
		return n, err
	}
	if r.state.oversized() {
		if err := r.state.rewrite(r.stateSnapshot()); err != nil {
			return n, err
		}
	}
	return n, r.state.flush()
}

// saveHardState takes Raft's hard state and records it in the state file
// if the term or vote changed (the commit index rides along). Caller
// holds mu.
func (r *raftReplica) saveHardState(hs *pb.HardState) {
	r.hard = hardState{term: hs.GetTerm(), vote: hs.GetVote(), commit: max(hs.GetCommit(), r.hard.commit)}
	if r.hard.term == r.savedTerm && r.hard.vote == r.savedVote {
		return
	}
	r.state.add(recHardState, r.hard.term, r.hard.vote, r.hard.commit)
	r.savedTerm, r.savedVote = r.hard.term, r.hard.vote
}

// writeEntries appends ents, cutting the log first where they replace
// entries; it returns how many it wrote. Caller holds mu.
func (r *raftReplica) writeEntries(ents []*pb.Entry) (int, error) {
	if len(ents) == 0 {
		return 0, nil
	}
	first := ents[0].GetIndex()
	if first <= r.anchor.index {
		return 0, fmt.Errorf("replica: entries from %d replace committed ones (the log is kept from %d)", first, r.anchor.index+1)
	}
	if first <= r.lastIndex() {
		return 0, r.cut(first)
	}
	if first != r.lastIndex()+1 {
		return 0, fmt.Errorf("replica: entries from %d do not follow the last one, %d", first, r.lastIndex())
	}
	run := 0 // ents[run:i] are batches of one term not written yet
	for i, e := range ents {
		if isBatchEntry(e) && (run == i || e.GetTerm() == ents[run].GetTerm()) {
			continue
		}
		if written, err := r.appendBatches(ents[run:i]); !written || err != nil {
			return run, err
		}
		run = i
		if isBatchEntry(e) {
			continue
		}
		r.appendSideEntry(e)
		run = i + 1
	}
	if written, err := r.appendBatches(ents[run:]); !written || err != nil {
		return run, err
	}
	return len(ents), nil
}

// isBatchEntry reports whether e carries records (one batch) rather than
// nothing (a new leader's empty entry) or a membership change.
func isBatchEntry(e *pb.Entry) bool {
	return e.GetType() == pb.EntryNormal && len(e.GetData()) > 0
}

// appendBatches writes entries of one term, each one batch at the offset
// it carries, with one write. It writes nothing, and says so, while the
// batch barrier is not durable. Caller holds mu.
//
// The batches are not verified again: the leader's come from appends its
// callers validated, a follower's were checked as they arrived. They are
// written from where they lie, without a copy: on a follower usually back
// to back in the frame that brought them, one part; on the leader each in
// the copy Raft made of its proposal, parts the write gathers.
func (r *raftReplica) appendBatches(ents []*pb.Entry) (written bool, err error) {
	if len(ents) == 0 {
		return true, nil
	}
	if !r.state.isDurable(r.batchBarrier) {
		return false, nil
	}
	next := r.endOf(r.lastIndex())
	added := make([]slot, 0, len(ents))
	var parts [][]byte // the batches, those that lie back to back as one part
	for _, e := range ents {
		h, err := record.ParseHeader(e.GetData())
		if err != nil || h.Size() != len(e.GetData()) {
			return false, fmt.Errorf("replica: entry %d is not one record batch (%d bytes): %v", e.GetIndex(), len(e.GetData()), err)
		}
		if h.BaseOffset != next {
			return false, fmt.Errorf("replica: entry %d holds offsets from %d, the log continues at %d", e.GetIndex(), h.BaseOffset, next)
		}
		next = h.LastOffset() + 1
		added = append(added, slot{end: next, term: e.GetTerm()})
		if n := len(parts); n > 0 {
			if run, ok := adjoin(parts[n-1], e.GetData()); ok {
				parts[n-1] = run
				continue
			}
		}
		parts = append(parts, e.GetData())
	}
	if err := r.local.appendVerified(int32(ents[0].GetTerm()), parts...); err != nil {
		return false, err
	}
	r.slots = append(r.slots, added...)
	return true, nil
}

// adjoin returns run extended over b if b lies right after it in the same
// buffer (run's capacity reaches over b), and reports whether it does.
func adjoin(run, b []byte) ([]byte, bool) {
	n := len(run)
	if len(b) == 0 || cap(run)-n < len(b) {
		return run, false
	}
	if ext := run[:n+len(b)]; &ext[n] == &b[0] {
		return ext, true
	}
	return run, false
}

// appendSideEntry records an entry without records in the state file.
// Caller holds mu.
func (r *raftReplica) appendSideEntry(e *pb.Entry) {
	se := sideEntry{offset: r.endOf(r.lastIndex()), entry: e}
	r.batchBarrier = r.state.add(recEntry, e.GetIndex(), e.GetTerm(), se.offset, uint64(e.GetType()), e.GetData())
	r.slots = append(r.slots, slot{end: se.offset, term: e.GetTerm(), meta: e})
}

// cut removes the entries from index on: the log from their first offset
// (durably) and the entries from the state file. Caller holds mu.
func (r *raftReplica) cut(index uint64) error {
	if index <= r.applied {
		return fmt.Errorf("replica: cannot cut applied entry %d (applied up to %d)", index, r.applied)
	}
	r.logger.Info("cutting entries that diverged from the leader's log", "index", index, "offset", r.endOf(index-1))
	if err := r.local.TruncateTo(r.endOf(index - 1)); err != nil {
		return err
	}
	r.slots = r.slots[:index-r.anchor.index-1]
	r.batchBarrier = r.state.add(recTruncate, index)
	return nil
}

// Sync makes the log and the state file durable. The log's recovery
// point waits for AfterSync: the acknowledgements a sync round sends wait
// for the data's fsync only.
//
// The host's loop may cut the log (Write) while a sync round runs this,
// waiting for another round's fsync: the wait then fails with
// ErrTruncated, though what the cut kept is durable (TruncateTo syncs
// it) and the rest is gone. So Sync waits again, for the log as it is
// now, rather than fail the group. Its round then acknowledges the
// entries of its own that were cut, as it would have had its fsync come
// just before the cut and its messages been slow: what a node may do in
// Raft (it keeps nothing it should not; an old leader may hear late of
// entries a later one cut).
func (r *raftReplica) Sync() error {
	for {
		err := r.local.log.SyncData()
		if err == nil {
			break
		}
		if !errors.Is(err, ErrTruncated) {
			return err
		}
	}
	return r.state.sync()
}

// raftCheckpointInterval is how often a replica's sync rounds write its
// log's recovery point at most: as often as the Kafka core's flusher does
// a single node's by default (--flush-interval), rather than every 250 ms
// of seglog's Sync. Every write of it is a small file's fsync and rename,
// and a replica runs many sync rounds a second; the point only shortens
// the scan after a crash.
const raftCheckpointInterval = time.Second

// AfterSync writes the log's recovery point, if it is due, and drops
// from the page cache what a follower need not keep (StateChanged), once
// the sync round's acknowledgements are out.
func (r *raftReplica) AfterSync() {
	r.local.log.Checkpoint(raftCheckpointInterval)
	r.local.log.DropCached()
}

// Apply applies a committed entry: the high watermark moves past it, a
// membership change is recorded, and the index is trimmed.
func (r *raftReplica) Apply(e *pb.Entry, cs *pb.ConfState) error {
	r.mu.Lock()
	i := e.GetIndex()
	if i <= r.applied || i > r.lastIndex() {
		r.mu.Unlock()
		return nil // applied before (a replay), or not ours to apply
	}
	r.applied = i
	r.raiseHighWatermark(r.endOf(i))
	r.hard.commit = max(r.hard.commit, i)
	var err error
	if cs != nil {
		r.config, r.configIndex = cs, i
		r.state.add(recConfig, i, cs)
		err = r.state.flush()
	}
	if err == nil {
		err = r.trim()
	}
	r.mu.Unlock()
	r.events.advanced()
	return err
}

// trim drops from the index the entries no follower should still need:
// all but window below the applied one, and on a leader none that a
// member lacks, unless that keeps more than maxWindow. Caller holds mu.
func (r *raftReplica) trim() error {
	if r.applied <= r.window {
		return nil
	}
	target := r.applied - r.window
	if r.leading && r.matched < target {
		target = max(r.matched, r.lastIndex()-min(r.lastIndex(), maxWindow))
	}
	target = min(target, r.applied)
	// The anchor carries the membership as of it: it must not fall below
	// the last change applied, whose predecessor is not kept.
	if target < r.configIndex || target < r.anchor.index+max(r.window/2, 1) {
		return nil
	}
	return r.moveAnchor(target)
}

// moveAnchor makes entry i (applied) the anchor. Caller holds mu.
func (r *raftReplica) moveAnchor(i uint64) error {
	a := anchor{index: i, term: r.slotAt(i).term, offset: r.endOf(i), config: r.config}
	r.slots = slices.Clone(r.slots[i-r.anchor.index:])
	r.anchor = a
	r.state.add(recAnchor, a.index, a.term, a.offset, ensureConfig(a.config))
	return r.state.flush()
}

// Committed hears, on the leader, that the entries up to index are
// committed: the high watermark moves past them before they are applied
// here (or fsynced here: a majority has them), as a Kafka leader's does
// once its in-sync replicas have a record.
func (r *raftReplica) Committed(index uint64) {
	r.mu.RLock()
	if index <= r.anchor.index {
		r.mu.RUnlock()
		return
	}
	end := r.endOf(min(index, r.lastIndex()))
	r.mu.RUnlock()
	if r.raiseHighWatermark(end) {
		r.events.advanced()
	}
}

// raiseHighWatermark moves the high watermark to end unless it is there
// already, and reports whether it moved.
func (r *raftReplica) raiseHighWatermark(end int64) bool {
	for {
		hw := r.hw.Load()
		if end <= hw {
			return false
		}
		if r.hw.CompareAndSwap(hw, end) {
			return true
		}
	}
}

// Matched tells a leader's replica how far every member's log matches.
func (r *raftReplica) Matched(index uint64) {
	r.mu.Lock()
	r.matched = index
	r.mu.Unlock()
}

// followerCacheKeep is how much of its log's durable tail a replica that
// does not lead keeps in the page cache (seglog's DropCacheBehind). Only
// a leader serves reads, and its followers read nothing back, so the rest
// is cache no reader uses: with three replicas two thirds of what a node
// writes, evicting in time the pages of the partitions it leads, whose
// consumers read them. What stays covers a new leader's first reads after
// a failover (consumers at the tail, followers a few rounds behind) and a
// follower's own: it reads back the entries it applies once its Raft
// keeps more than 16 MiB of them unapplied (raft's entryCache), so keeping
// twice that keeps those reads in memory. A follower writes past the page
// cache (seglog's WriteDirect), though: of what it writes, only what it
// reads back is cached, and a new leader's first reads go to the disk.
const followerCacheKeep = 32 << 20

// StateChanged passes the group's new state on to the Raft log, and
// tells the log whether it is read (leading) or only written.
func (r *raftReplica) StateChanged(s raft.Status) {
	r.mu.Lock()
	r.leading = s.Role == etcdraft.StateLeader
	r.mu.Unlock()
	if r.leading {
		r.local.log.DropCacheBehind(0)
	} else {
		r.local.log.DropCacheBehind(followerCacheKeep)
	}
	r.local.log.WriteDirect(!r.leading)
	r.events.stateChanged(s)
}

// endOffset is the offset after the last entry written.
func (r *raftReplica) endOffset() int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.endOf(r.lastIndex())
}

// stateSnapshot is what the state file must hold now. Caller holds mu.
func (r *raftReplica) stateSnapshot() *raftState {
	st := &raftState{hard: hardState{term: r.savedTerm, vote: r.savedVote, commit: r.hard.commit},
		anchor: r.anchor, config: r.config, configIndex: r.configIndex}
	for i, s := range r.slots {
		if s.meta != nil {
			st.entries = append(st.entries, sideEntry{offset: r.endOf(r.anchor.index + uint64(i)), entry: s.meta})
		}
	}
	if r.stage != nil && r.stage.installing != nil {
		st.install = r.stage.installing
	}
	return st
}

// close closes the state file and the log.
func (r *raftReplica) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropStage()
	return errors.Join(r.state.close(), r.local.Close())
}

// releaseBelow gives up the entries whose records lie below offset (all
// applied), moving the anchor past them, and returns up to where the log
// may then delete records: offset, or less if the last membership change
// applied lies above the entry it would move to.
func (r *raftReplica) releaseBelow(offset int64) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	target := r.anchor.index
	for i := r.anchor.index + 1; i <= r.applied && r.endOf(i) <= offset; i++ {
		target = i
	}
	if target < r.configIndex {
		target = max(r.anchor.index, min(r.configIndex, target))
		offset = min(offset, r.endOf(target))
	}
	if target > r.anchor.index {
		if err := r.moveAnchor(target); err != nil {
			return r.anchor.offset, err
		}
	}
	return offset, nil
}

// retainedFrom is the offset below which the log may delete segments: the
// anchor's, below which no entry is indexed.
func (r *raftReplica) retainedFrom() int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.anchor.offset
}
