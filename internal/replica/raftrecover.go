package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wharf-mq/wharf/internal/record"
)

// Recovery of a Raft replica: rebuilding the index from the state file
// and the log.
//
// The index is not stored: the state file has the anchor and the entries
// without records, the log has one batch per other entry, and walking the
// two from the anchor puts every entry back at its index. At each index
// the walk takes the state file's entry for it if there is one (it must
// sit at the walk's offset), else the next batch of the log, which must
// continue the log and carry the term reached so far: a batch of a later
// term without that term's first entry (a new leader's empty entry, always
// in the state file) before it is damage.
//
// What makes the walk sound is the order of writes (raftreplica.go's
// Write): a batch is written only once the state file's entries and
// truncate records before it are durable (Write's short count has the
// host sync first, however many Writes and sync rounds lie between), and
// each file, append-only, keeps a prefix of what was written to it. A
// power cut keeps of each file what was fsynced and any part of the rest,
// the two files independently: so the state file may end up ahead of the
// log (entries past a batch the log lost) but never behind a batch the
// walk needs an entry for. After a crash the two files hold every entry up
// to some point, and beyond it only parts of writes not yet fsynced,
// none of which was acknowledged (an acknowledgement, like a vote, leaves
// only once its sync round has fsynced both files): the walk stops at the
// first index with neither an entry nor a batch, and what lies beyond
// (batches of a torn write, state entries past the log) is cut, the state
// entries with a durable truncate record so that they cannot come back.

// recover loads the replica's state: it finishes an install the state
// file records, walks the log, and cuts what lies beyond the last entry.
func (r *raftReplica) recover(st *raftState, dir string) error {
	r.hard = st.hard
	r.savedTerm, r.savedVote = st.hard.term, st.hard.vote
	r.anchor = st.anchor
	r.config, r.configIndex = st.config, st.configIndex
	if r.config == nil {
		r.config, r.configIndex = st.anchor.config, st.anchor.index
	}
	if in := st.install; in != nil {
		staged, err := Open(filepath.Join(dir, stagingDir), DefaultConfig(), Options{Logger: r.logger})
		if err != nil {
			return fmt.Errorf("replica: the snapshot being installed: %w", err)
		}
		r.stage = &snapshotStage{index: in.index, term: in.term, from: in.from, next: in.end, reset: in.reset,
			marker: snapshotMarker{start: in.from, end: in.end}, log: staged, installing: in}
		if err := r.completeInstall(in); err != nil {
			return err
		}
	} else if err := os.RemoveAll(filepath.Join(dir, stagingDir)); err != nil {
		return err
	}
	rest, err := r.walk(st.entries)
	if err != nil {
		return err
	}
	if err := r.cutBeyondWalk(rest); err != nil {
		return err
	}
	last := r.lastIndex()
	r.applied = min(max(r.anchor.index, r.configIndex), last)
	r.hard.commit = min(max(r.hard.commit, r.applied), last)
	r.hw.Store(r.endOf(r.applied))
	return nil
}

// walk rebuilds the slots from the anchor and returns the state entries
// left over beyond the last entry.
func (r *raftReplica) walk(entries []sideEntry) ([]sideEntry, error) {
	term, offset := r.anchor.term, r.anchor.offset
	batches := batchWalker{l: r.local, at: offset}
	for next := r.anchor.index + 1; ; next++ {
		if len(entries) > 0 && entries[0].entry.GetIndex() == next {
			e := entries[0]
			if e.offset != offset || e.entry.GetTerm() < term {
				return nil, r.damaged(fmt.Errorf("entry %d of term %d sits at offset %d, the log has term %d up to offset %d",
					next, e.entry.GetTerm(), e.offset, term, offset))
			}
			term = e.entry.GetTerm()
			r.slots = append(r.slots, slot{end: offset, term: term, meta: e.entry})
			entries = entries[1:]
			continue
		}
		h, ok, err := batches.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return entries, nil
		}
		epoch := uint64(max(h.PartitionLeaderEpoch, 0))
		if h.BaseOffset != offset || epoch != term {
			return nil, r.damaged(fmt.Errorf("entry %d: batch [%d, %d] of epoch %d where the log continues at offset %d in term %d",
				next, h.BaseOffset, h.LastOffset(), epoch, offset, term))
		}
		offset = h.LastOffset() + 1
		r.slots = append(r.slots, slot{end: offset, term: term})
	}
}

// damaged is the error of a replica whose log and state file disagree.
func (r *raftReplica) damaged(err error) error {
	return &CorruptionError{File: r.state.path, Err: fmt.Errorf("the Raft state and the log disagree: %w", err)}
}

// cutBeyondWalk cuts what lies beyond the last entry: batches of a torn
// round, and state entries of it (with a durable truncate record).
func (r *raftReplica) cutBeyondWalk(rest []sideEntry) error {
	end := r.endOf(r.lastIndex())
	if end < r.local.EndOffset() {
		r.logger.Warn("cutting records written after the last complete Raft entry", "from", end, "to", r.local.EndOffset())
		if err := r.local.TruncateTo(end); err != nil {
			return err
		}
	}
	if len(rest) == 0 {
		return nil
	}
	r.state.add(recTruncate, r.lastIndex()+1)
	return r.state.sync()
}

// batchWalker walks the batch headers of a log from an offset, reading
// headers only.
type batchWalker struct {
	l       *Local
	at      int64
	pending []record.Header
}

// next returns the next batch's header, ok false at the end of the log.
func (w *batchWalker) next() (record.Header, bool, error) {
	if len(w.pending) == 0 {
		if w.at >= w.l.EndOffset() {
			return record.Header{}, false, nil
		}
		if err := w.fill(); err != nil {
			return record.Header{}, false, err
		}
		if len(w.pending) == 0 {
			return record.Header{}, false, nil
		}
	}
	h := w.pending[0]
	w.pending = w.pending[1:]
	w.at = h.LastOffset() + 1
	return h, true, nil
}

// fill reads the headers of the batches of a read from w.at on.
func (w *batchWalker) fill() error {
	sl, err := w.l.Read(max(w.at, w.l.StartOffset()), 16<<20)
	if err != nil {
		return err
	}
	defer sl.Release()
	head := make([]byte, record.HeaderSize)
	for _, c := range sl.Chunks {
		for pos := c.Pos; pos < c.Pos+c.Len; {
			n := min(int64(len(head)), c.Pos+c.Len-pos)
			if _, err := c.File.ReadAt(head[:n], pos); err != nil {
				return err
			}
			h, err := record.ParseHeader(head[:n])
			if err != nil && !errors.Is(err, record.ErrShort) {
				return err
			}
			w.pending = append(w.pending, h)
			pos += int64(h.Size())
		}
	}
	return nil
}
