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
// to the leader, its vote). The host queues them per group. writeRound
// writes every group's queue to its replica (page cache only) and returns
// one SyncBatch; running it fsyncs each group's files, several groups at a
// time. So one round covers every group that wrote since the last one,
// whatever the number of proposals.
//
// Up to SyncRounds rounds are in flight at once: what arrives while a
// round fsyncs is written at once and its round starts at once (a log's
// fsyncs still run one after another, each covering everything written
// before it), rather than waiting for the loop to hear the first round
// end. A group's writes are in order in the rounds, and its files on disk
// are always its writes up to some point plus part of the ones after,
// which is what the replica's recovery relies on. A write the replica
// wants durable before the next (Replica.Write's short count) holds the
// group's later writes back until its round is delivered.
//
// A round delivers its responses as soon as it can: those to other nodes
// (a follower's acknowledgement to its leader, a vote) are sent by the
// round itself the moment its group's fsync ends, without a trip through
// the loop; those to this node's Raft are stepped by Synced, in round
// order. A round's fsync of a group covers every earlier write of that
// group, so an acknowledgement sent ahead of an earlier round's is still
// true. A leader sends its entries to its followers before they are
// durable here (Raft's messages to peers do not wait for local writes), so
// its fsync and theirs overlap.

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
	seq       uint64 // the round's number, counted by syncRounds
	items     []syncItem
	transport Transport // sends the remote responses; nil: there are none
	done      bool      // Synced has it (owned by the loop)
}

type syncItem struct {
	g      *Group
	local  []*pb.Message // responses to this node's Raft, stepped by Synced
	remote []*pb.Message // responses to peers, sent by Run once durable
	err    error
}

// Len is the number of groups in the round.
func (b *SyncBatch) Len() int { return len(b.items) }

// Run syncs every group of the round, up to workers at once, and sends
// each group's responses to its peers as soon as its sync succeeded.
func (b *SyncBatch) Run(workers int) {
	if len(b.items) == 1 || workers <= 1 {
		for i := range b.items {
			b.sync(&b.items[i])
		}
		return
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(b.items)) {
		wg.Go(func() {
			for i := range next {
				b.sync(&b.items[i])
			}
		})
	}
	for i := range b.items {
		next <- i
	}
	close(next)
	wg.Wait()
}

// sync makes one group's writes durable, sends its remote responses, and
// then does what the replica wants done after a sync.
func (b *SyncBatch) sync(it *syncItem) {
	if it.err = it.g.rep.Sync(); it.err != nil {
		return
	}
	if b.transport != nil {
		for _, m := range it.remote {
			b.transport.Send(m.GetTo(), []Envelope{{Kind: KindRaft, Group: it.g.id, Msg: m}})
		}
	}
	it.g.rep.AfterSync()
}

// syncRounds are the sync rounds in flight, oldest first. Owned by the
// loop.
type syncRounds struct {
	inFlight  []*SyncBatch // started, not yet delivered
	next      uint64       // the number of the next round
	delivered uint64       // every round numbered below it is delivered
}

// running is how many rounds in flight have not reported to Synced.
func (r *syncRounds) running() int {
	n := 0
	for _, b := range r.inFlight {
		if !b.done {
			n++
		}
	}
	return n
}

// writeRound writes every queued append, unless SyncRounds rounds are in
// flight, and returns the round that makes them durable.
func (h *Host) writeRound() *SyncBatch {
	if len(h.rounds.inFlight) >= h.cfg.SyncRounds || len(h.writers) == 0 {
		return nil
	}
	b := &SyncBatch{seq: h.rounds.next, transport: h.cfg.Transport}
	for _, id := range slices.Sorted(maps.Keys(h.writers)) {
		g := h.writers[id]
		g.mu.Lock()
		if g.writeAfter > h.rounds.delivered {
			g.mu.Unlock()
			continue // stays queued: an earlier write must be durable first
		}
		delete(h.writers, id)
		if !g.removed && g.failed == nil {
			if it, ok := h.writeQueue(g, b.seq); ok {
				b.items = append(b.items, it)
			}
		}
		g.mu.Unlock()
	}
	if len(b.items) == 0 {
		return nil
	}
	h.rounds.next++
	h.rounds.inFlight = append(h.rounds.inFlight, b)
	return b
}

// writeQueue writes g's queued appends in order, stopping early where the
// replica must sync before it writes more (the rest stays queued until
// round seq, which makes the write durable, is delivered), and returns
// the round's item for g: the responses of the appends written in full.
// Caller holds g.mu.
func (h *Host) writeQueue(g *Group, seq uint64) (syncItem, bool) {
	it := syncItem{g: g}
	for len(g.appends) > 0 {
		pa := g.appends[0]
		n, err := g.rep.Write(&pa.w)
		if err != nil {
			h.fail(g, err)
			return syncItem{}, false
		}
		pa.w.HardState, pa.w.Snapshot = nil, nil
		pa.w.Entries = pa.w.Entries[n:]
		if len(pa.w.Entries) > 0 {
			g.writeAfter = seq + 1
			h.writers[g.id] = g // the rest once this round is delivered
			break
		}
		for _, m := range pa.responses {
			if m.GetTo() == h.cfg.NodeID {
				it.local = append(it.local, m)
			} else {
				it.remote = append(it.remote, m)
			}
		}
		g.appends[0] = nil
		g.appends = g.appends[1:]
	}
	h.leaderCommitted(g)
	return it, true
}

// Synced ends a sync round. Rounds are delivered in the order they
// started: a round that ends before an earlier one waits for it. Delivering
// one steps the responses to this node's Raft of what became durable (or
// fails the groups whose sync failed) and queues its groups for the next
// Process.
func (h *Host) Synced(b *SyncBatch) {
	b.done = true
	for len(h.rounds.inFlight) > 0 && h.rounds.inFlight[0].done {
		r := h.rounds.inFlight[0]
		h.rounds.inFlight[0] = nil
		h.rounds.inFlight = h.rounds.inFlight[1:]
		h.rounds.delivered = r.seq + 1
		h.deliverRound(r)
	}
	if len(h.writers) > 0 {
		h.signal()
	}
}

// deliverRound steps the local responses of a round's groups, or fails
// the groups whose sync failed.
func (h *Host) deliverRound(b *SyncBatch) {
	for _, it := range b.items {
		g := it.g
		g.mu.Lock()
		switch {
		case g.removed:
		case it.err != nil:
			h.fail(g, it.err)
		default:
			for _, m := range it.local {
				h.deliverLocal(g, m)
			}
			h.markDirty(g, false)
		}
		g.mu.Unlock()
	}
}
