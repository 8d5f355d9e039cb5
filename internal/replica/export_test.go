package replica

import "fmt"

// SetStateSyncHook installs fn as the state files' fsync observer (nil
// removes it) and returns a function restoring the previous one.
func SetStateSyncHook(fn func(path string, size int64)) (restore func()) {
	var p *func(string, int64)
	if fn != nil {
		p = &fn
	}
	prev := stateSyncHook.Swap(p)
	return func() { stateSyncHook.Store(prev) }
}

// Entries is the replica's etcd raft Storage.Entries, as a leader's Raft
// reads its log to send a follower appends.
func (l *RaftLog) Entries(lo, hi, maxSize uint64) (int, error) {
	ents, err := l.rep.Entries(lo, hi, maxSize)
	return len(ents), err
}

// SnapshotState describes the replica's side of snapshots: its anchor,
// the entries applied and written, and the stage of a snapshot being
// received, for a test whose follower does not catch up to say why.
func (l *RaftLog) SnapshotState() string {
	r := l.rep
	r.mu.RLock()
	defer r.mu.RUnlock()
	s := fmt.Sprintf("anchor {index %d term %d offset %d} applied %d last %d commit %d",
		r.anchor.index, r.anchor.term, r.anchor.offset, r.applied, r.lastIndex(), r.hard.commit)
	if st := r.stage; st != nil {
		s += fmt.Sprintf(" stage {index %d term %d records [%d, %d) from %d next %d reset %v installing %v staged [%d, %d)}",
			st.index, st.term, st.marker.start, st.marker.end, st.from, st.next, st.reset, st.installing != nil,
			st.log.StartOffset(), st.log.EndOffset())
	} else {
		s += " no stage"
	}
	return s
}

// CacheKeep is how much of its durable tail the replica's log keeps in
// the page cache (0: all of it).
func (l *RaftLog) CacheKeep() int64 { return l.rep.local.log.CacheKeep() }

// FollowerCacheKeep is what a replica that does not lead keeps.
const FollowerCacheKeep = followerCacheKeep

// StageOwnSnapshot sends the replica's current snapshot from its start,
// as its leader sends it to a follower that asked, into the stage of a
// whole-snapshot follower whose staging log is opened in dir, calling
// sent after each chunk. It returns the staged log and whether the stage
// is complete.
func (l *RaftLog) StageOwnSnapshot(dir string, sent func()) (*Local, bool, error) {
	r := l.rep
	r.mu.RLock()
	s := r.snapshotLocked()
	r.mu.RUnlock()
	m, err := decodeMarker(s.GetData())
	if err != nil {
		return nil, false, err
	}
	staged, err := Open(dir, DefaultConfig(), Options{Logger: r.logger})
	if err != nil {
		return nil, false, err
	}
	index, term := s.GetMetadata().GetIndex(), s.GetMetadata().GetTerm()
	st := &snapshotStage{index: index, term: term, marker: m, from: -1, next: m.start, reset: true, log: staged}
	follower := &raftReplica{logger: r.logger, stage: st}
	err = r.SnapshotData(index, term, m.start, func(off int64, data []byte) error {
		err := follower.StageSnapshot(index, term, off, data)
		sent()
		return err
	})
	return staged, st.complete(), err
}

// Retryable is whether a failed proposal is tried again (retryable).
var Retryable = retryable
