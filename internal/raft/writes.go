package raft

import (
	"maps"
	"slices"
	"sync"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Storing what Raft asks: the write queue and sync rounds.
//
// With etcd raft's AsyncStorageWrites every Ready hands the host a
// MsgStorageAppend per group: entries, hard state, snapshot, and the
// responses to deliver once they are durable (this node's acknowledgement
// to the leader, its vote). The host queues them per group. When no sync
// round is in flight, writeRound writes every group's queue to its
// replica (page cache only) and returns one SyncBatch; running it fsyncs
// each group's files, several groups at a time, and Synced then delivers
// the responses. So one round covers every group that wrote since the
// last one, whatever the number of proposals, and a group's next writes
// wait for the round in flight: its files on disk are always its writes
// up to some round plus part of the next, which is what the replica's
// recovery relies on. A leader sends its entries to its followers before
// they are durable here (Raft's messages to peers do not wait for local
// writes), so its fsync and theirs overlap.

// pendingAppend is a MsgStorageAppend not yet written in full.
type pendingAppend struct {
	w         Write
	responses []*pb.Message
}

func newPendingAppend(m *pb.Message) *pendingAppend {
	pa := &pendingAppend{responses: m.GetResponses()}
	pa.w.Entries = m.GetEntries()
	pa.w.Snapshot = m.GetSnapshot()
	if m.Term != nil { // all three are set when the hard state changed
		pa.w.HardState = &pb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
	}
	return pa
}

// SyncBatch is a sync round: the groups that wrote, and what to deliver
// once their writes are durable.
type SyncBatch struct {
	items []syncItem
}

type syncItem struct {
	g         *Group
	responses []*pb.Message
	err       error
}

// Len is the number of groups in the round.
func (b *SyncBatch) Len() int { return len(b.items) }

// Run syncs every group of the round, up to workers at once.
func (b *SyncBatch) Run(workers int) {
	if len(b.items) == 1 || workers <= 1 {
		for i := range b.items {
			b.items[i].err = b.items[i].g.rep.Sync()
		}
		return
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(b.items)) {
		wg.Go(func() {
			for i := range next {
				b.items[i].err = b.items[i].g.rep.Sync()
			}
		})
	}
	for i := range b.items {
		next <- i
	}
	close(next)
	wg.Wait()
}

// writeRound writes every queued append, unless a round is in flight, and
// returns the round that makes them durable.
func (h *Host) writeRound() *SyncBatch {
	if h.syncing || len(h.writers) == 0 {
		return nil
	}
	b := &SyncBatch{}
	for _, id := range slices.Sorted(maps.Keys(h.writers)) {
		g := h.writers[id]
		delete(h.writers, id)
		g.mu.Lock()
		if !g.removed && g.failed == nil {
			if responses, ok := h.writeQueue(g); ok {
				b.items = append(b.items, syncItem{g: g, responses: responses})
			}
		}
		g.mu.Unlock()
	}
	if len(b.items) == 0 {
		return nil
	}
	h.syncing = true
	return b
}

// writeQueue writes g's queued appends in order, stopping early where the
// replica must sync before it writes more (the rest stays queued for the
// next round), and returns the responses of the appends written in full.
// Caller holds g.mu.
func (h *Host) writeQueue(g *Group) ([]*pb.Message, bool) {
	var responses []*pb.Message
	for len(g.appends) > 0 {
		pa := g.appends[0]
		n, err := g.rep.Write(&pa.w)
		if err != nil {
			h.fail(g, err)
			return nil, false
		}
		pa.w.HardState, pa.w.Snapshot = nil, nil
		pa.w.Entries = pa.w.Entries[n:]
		if len(pa.w.Entries) > 0 {
			h.writers[g.id] = g // the rest after this round
			break
		}
		responses = append(responses, pa.responses...)
		g.appends[0] = nil
		g.appends = g.appends[1:]
	}
	return responses, true
}

// Synced ends a sync round: it delivers the responses of what became
// durable (or fails the groups whose sync failed) and queues the groups
// for the next Process.
func (h *Host) Synced(b *SyncBatch) {
	h.syncing = false
	for _, it := range b.items {
		g := it.g
		g.mu.Lock()
		switch {
		case g.removed:
		case it.err != nil:
			h.fail(g, it.err)
		default:
			for _, m := range it.responses {
				h.deliverLocal(g, m)
			}
			h.markDirty(g, false)
		}
		g.mu.Unlock()
	}
	if len(h.writers) > 0 {
		h.signal()
	}
}
